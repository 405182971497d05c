"""Where a dual-stream layer's overlap goes: its traced multi_stream graph replays against its sequential ones.

Reads a ``kernels_real.bench`` run with graph traces of both strategies (``kernels.json`` or ``.json.gz``, as
``--trace-timed-graphs`` leaves them) and, per preset and token count, matches every kernel of a multi_stream
layer to the same kernel of a sequential layer (by name and occurrence) and reports per-layer medians: the
layer's span under each strategy, the shared experts' work on the aux stream (and the blocks of its main
kernels, against the GPU's SM count), and the kernels that took longest
beyond their sequential time (their stream, grid, threads per block and registers per thread: the resources
that decide whether another kernel's blocks fit beside theirs). The first replay of each trace is dropped
(a profiled graph's first replay runs slow).

    PYTHONPATH=. python benchmarks/layer_overlap.py calibration/measurements/h200/2026-12-03/layer_traces
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from calibration.layer_traces import Kernel, aux_stream, keyed, layers_of, load_kernel_records, replays_per_trace
from simulator.errors import InputError, print_or_fail

DEFAULT_RUN = Path("calibration/measurements/h200/2026-12-03/layer_traces")


@dataclass(frozen=True)
class Slowed:
    """One kernel of the multi_stream layer that ran longer than in the sequential layer (medians, µs)."""

    name: str
    stream: str
    ctas: int
    threads: int
    registers: int | None
    sequential_us: float
    multi_stream_us: float


@dataclass(frozen=True)
class LayerOverlap:
    preset: str
    tokens: int
    measured_gain: float | None
    sequential_span_us: float
    multi_stream_span_us: float
    aux_work_us: float
    aux_blocks: list[int]  # blocks (CTAs) of the aux kernels that do a quarter or more of its work
    slowed: list[Slowed]





def span(layer: list[Kernel]) -> float:
    return max(k["start_us"] + k["dur_us"] for k in layer) - min(k["start_us"] for k in layer)


def compare(preset: str, tokens: int, sequential: list[list[Kernel]], multi_stream: list[list[Kernel]],
            gain: float | None, top: int) -> LayerOverlap:
    aux = aux_stream(multi_stream[0])
    seq_keyed = [keyed(layer) for layer in sequential]
    ms_keyed = [keyed(layer) for layer in multi_stream]
    slowed, aux_work, aux_kernels = [], [], []
    for key, k in ms_keyed[0].items():
        solo = statistics.median(layer[key]["dur_us"] for layer in seq_keyed if key in layer)
        beside = statistics.median(layer[key]["dur_us"] for layer in ms_keyed if key in layer)
        grid, block = k.get("grid") or [1], k.get("block") or [1]
        if k["stream"] == aux:
            aux_work.append(solo)
            aux_kernels.append((solo, math.prod(grid)))
        slowed.append(Slowed(k["name"], "aux" if k["stream"] == aux else "main", math.prod(grid),
                             math.prod(block), k.get("registers per thread"), solo, beside))
    slowed.sort(key=lambda s: s.sequential_us - s.multi_stream_us)
    big = [blocks for solo, blocks in aux_kernels if solo >= 0.25 * sum(aux_work)]
    return LayerOverlap(preset, tokens, gain, statistics.median(map(span, sequential)),
                        statistics.median(map(span, multi_stream)), sum(aux_work), big, slowed[:top])




def overlaps(run: Path, top: int) -> list[LayerOverlap]:
    records = load_kernel_records(run)
    cases_path = run / "cases.json"
    cases = json.loads(cases_path.read_text()) if cases_path.is_file() else []
    timed = {(c["preset"], c["tokens"], c["strategy"]): c for c in cases if c["mode"] == "graph"}
    by_point: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in records:
        if r["mode"] == "graph" and r["strategy"] in ("sequential", "multi_stream"):
            by_point.setdefault((r["preset"], r["tokens"]), {})[r["strategy"]] = r
    out = []
    for (preset, tokens), pair in sorted(by_point.items()):
        if len(pair) < 2:
            continue
        seq_case, ms_case = timed.get((preset, tokens, "sequential")), timed.get((preset, tokens, "multi_stream"))
        gain = 1 - ms_case["median_us"] / seq_case["median_us"] if seq_case and ms_case else None
        replays = replays_per_trace(run / pair["sequential"]["trace"])
        out.append(compare(preset, tokens, layers_of(pair["sequential"], replays),
                           layers_of(pair["multi_stream"], replays), gain, top))
    if not out:
        raise InputError(f"{run}: no point with graph traces of both sequential and multi_stream")
    return out


def markdown(results: list[LayerOverlap]) -> str:
    lines = ["| preset | tokens | measured gain | layer span seq → ms (µs) | aux work (µs) | its main kernels' "
             "blocks | slowed most (stream, blocks × threads, registers) | seq → ms (µs) |",
             "| --- | ---: | ---: | --- | ---: | --- | --- | --- |"]
    for r in results:
        gain = "n/a" if r.measured_gain is None else f"{100 * r.measured_gain:+.1f} %"
        for i, s in enumerate(r.slowed):
            head = (f"| {r.preset} | {r.tokens} | {gain} | {r.sequential_span_us:.0f} → {r.multi_stream_span_us:.0f} | "
                    f"{r.aux_work_us:.0f} | {', '.join(map(str, r.aux_blocks))} |") if i == 0 else "| | | | | | |"
            lines.append(f"{head} {s.name[:48]} ({s.stream}, {s.ctas} × {s.threads}, {s.registers}) | "
                         f"{s.sequential_us:.1f} → {s.multi_stream_us:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", type=Path, default=DEFAULT_RUN, help=f"bench run folder (default {DEFAULT_RUN})")
    ap.add_argument("--top", type=int, default=2, help="kernels listed per point (default 2)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def report() -> str:
        if args.top < 1:
            raise InputError("--top must be >= 1")
        results = overlaps(args.run, args.top)
        return json.dumps([asdict(r) for r in results], indent=1) if args.json else markdown(results)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
