"""Which branch of a multi_stream layer starts first inside a replayed graph, by the layer's place in the replay.

Per layer of a bench run's multi_stream graph traces: the **fork offset**, the start of the shared experts' first
kernel (on the aux stream) minus the start of the routing chain's first kernel (the cast ahead of the fp32
router), and how much longer that first routing kernel ran than in the sequential layer, where it runs alone.
The layers are grouped by their place in the replay (a graph of ``layers_per_replay`` layers, from the run's
``cases.json``; each trace's first replay dropped). The simulator starts the forked branch one graph fork/join
latency (the profile's ``graph_join_us``) after its sibling in every layer.

    PYTHONPATH=. python benchmarks/fork_order.py calibration/measurements/h200/2026-12-03/layer_traces
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import whatif_graph_traces as wg

from calibration import layer_traces as lo
from simulator.errors import InputError, print_or_fail
from simulator.profile import load_profile
from simulator.validation import load_cases

HEAD_TOKENS = (2, 16)
DEFAULT_RUNS = (Path("calibration/measurements/h200/2026-12-03/layer_traces"),
                Path("calibration/measurements/h200/2026-12-03/layer_traces_heldout"),
                Path("calibration/measurements/h100/2026-12-05/layer_traces_small"),
                Path("calibration/measurements/h100/2026-12-05/layer_traces_large"),
                Path("calibration/measurements/h100/2026-12-07/layer_traces_unseen_large"))
HEAD_RUNS = (DEFAULT_RUNS[0], DEFAULT_RUNS[2])  # the calibration presets' traces on each GPU


@dataclass(frozen=True)
class ForkedLayer:
    """One multi_stream layer: its place in the replay (0: the first), the replay's layers, its fork offset (µs)
    and its routing head's time over the sequential layer's (median over that trace's layers); its point (preset,
    tokens), the shared experts' first GEMM (blocks, µs) and the routing head (blocks, µs alone, µs here)."""

    place: int
    per_replay: int
    fork_us: float
    head_ratio: float
    point: tuple[str, int]
    gemm: tuple[int, float]
    head: tuple[int, float, float]


def forked_layers(run: Path) -> list[ForkedLayer]:
    """Every steady multi_stream layer of ``run``'s graph traces that has a sequential trace beside it."""
    records = {(r["preset"], r["tokens"], r["strategy"]): r for r in lo.load_kernel_records(run)
               if r["mode"] == "graph"}
    timed = {(c["preset"], c["tokens"], c["strategy"]): c for c in load_cases(run, eager_rerun=False)
             if c.get("mode") == "graph"} if (run / "cases.json").is_file() else {}
    out = []
    for (preset, tokens, strategy), ms_record in sorted(records.items()):
        seq_record = records.get((preset, tokens, "sequential"))
        if strategy != "multi_stream" or seq_record is None:
            continue
        per_replay = int(timed.get((preset, tokens, strategy), {}).get("layers_per_replay") or 0)
        if per_replay < 1:
            per_replay = max(1, int(ms_record["layers"]) // lo.replays_per_trace(run / ms_record["trace"]))
        replays = int(ms_record["layers"]) // per_replay
        seq_layers, ms_layers = lo.layers_of(seq_record, 1), lo.layers_of(ms_record, 1)
        shared = wg.aux_positions(seq_layers[0], ms_layers[0])
        if not shared:
            continue
        keys = list(lo.keyed(seq_layers[0]))
        head = keys[next(i for i in range(len(keys)) if i not in shared)]
        alone = statistics.median(lo.keyed(layer)[head]["dur_us"] for layer in seq_layers)
        first = per_replay if replays > 1 else 0
        for i, layer in enumerate(ms_layers[first:], start=first):
            by_key = lo.keyed(layer)
            gemm, routing = by_key[keys[shared[0]]], by_key[head]
            out.append(ForkedLayer(i % per_replay, per_replay, gemm["start_us"] - routing["start_us"],
                                   routing["dur_us"] / alone, (preset, tokens),
                                   (_blocks(gemm), gemm["dur_us"]), (_blocks(routing), alone, routing["dur_us"])))
    if not out:
        raise InputError(f"{run}: no preset with sequential and multi_stream graph traces")
    return out


def _blocks(kernel: dict) -> int:
    grid = kernel.get("grid") or [0]
    return int(math.prod(grid))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _simulated() -> str:
    """The simulator's fork offset: the graph fork/join latency of the profiles of the traced GPUs."""
    figures = []
    for name in ("h200", "h100"):
        join = load_profile(name).host.graph_join_us
        figures.append(f"{name}: {join.value:+.2f} µs" if join is not None else f"{name}: +0.00 µs (none measured)")
    return "one graph fork/join latency (" + ", ".join(figures) + ")"


def markdown(runs: list[Path]) -> str:
    lines = ["Fork offset: the shared experts' first kernel's start minus the routing chain's first kernel's (µs; "
             "negative: the shared experts start first). Head time: the routing chain's first kernel (the cast "
             "ahead of the fp32 router) against the sequential layer's, median. Each trace's first replay dropped. "
             f"The simulator starts the shared experts {_simulated()} after the routing head in every layer. "
             "Not run on AMD hardware.", "",
             "| run | place in the replay | layers | fork offset, median (p10 / p90) | shared experts first | "
             "head time beside / alone |",
             "| --- | --- | ---: | --- | ---: | ---: |"]
    for run in runs:
        groups: dict[tuple[int, int], list[ForkedLayer]] = defaultdict(list)
        for layer in forked_layers(run):
            groups[(layer.per_replay, layer.place)].append(layer)
        for (per_replay, place), layers in sorted(groups.items()):
            offsets = [layer.fork_us for layer in layers]
            first = sum(offset < 0 for offset in offsets) / len(offsets)
            lines.append(f"| {run.name} ({run.parent.parent.name}) | {place + 1} of {per_replay} | {len(layers)} | "
                         f"{statistics.median(offsets):+.2f} ({_quantile(offsets, 0.1):+.2f} / "
                         f"{_quantile(offsets, 0.9):+.2f}) | {100 * first:.0f} % | "
                         f"{statistics.median(layer.head_ratio for layer in layers):.2f}× |")
    head_runs = [run for run in runs if run in HEAD_RUNS] or runs  # the defaults' one per GPU, else every run
    heads = ", ".join(f"{run.name} ({run.parent.parent.name})" for run in head_runs)
    lines += ["", f"Runs {heads}: the routing head where the shared experts' first GEMM started first (the "
              f"layers of negative fork offset), at {' and '.join(map(str, HEAD_TOKENS))} tokens: medians over "
              "those layers. Both GPUs have 132 SMs; the GEMM's blocks each hold a whole SM.", "",
              "| run | preset | tokens | shared GEMM blocks | its µs | head blocks | head µs alone | head µs beside |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for run in head_runs:
        points: dict[tuple[str, int], list[ForkedLayer]] = defaultdict(list)
        for layer in forked_layers(run):
            if layer.fork_us < 0 and layer.point[1] in HEAD_TOKENS:
                points[layer.point].append(layer)
        for (preset, tokens), layers in sorted(points.items()):
            lines.append(f"| {run.name} ({run.parent.parent.name}) | {preset} | {tokens} | {layers[0].gemm[0]} | "
                         f"{statistics.median(layer.gemm[1] for layer in layers):.1f} | {layers[0].head[0]} | "
                         f"{layers[0].head[1]:.2f} | {statistics.median(layer.head[2] for layer in layers):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="bench runs with graph traces of both strategies (default: the H200's and H100's)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs))


if __name__ == "__main__":
    sys.exit(main())
