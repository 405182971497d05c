"""How much the routing chain's latency-bound kernels slow beside the shared experts, by kernel class and by the
share of the HBM ceiling the shared experts draw meanwhile: measured in the layer's graph traces, against the
placement probe's curves the profile keeps.

Per point of a layer-trace run (1/2/4 tokens), each main-stream kernel of the multi_stream layer that starts
before the first grouped GEMM (the routing chain) is matched by (name, occurrence) with the sequential layer: its
slowdown is its duration beside the aux stream over its median duration alone. The HBM share is that of the aux
kernels overlapping it, weighted by overlap: each aux kernel's bytes over its solo time against the ceiling, from
the sequential *eager* trace of the same point (``eager_traces/``, shapes recorded; a graph trace has none).
Classes are ``simulator.placement.latency_class``'s; the GEMM kernels of light blocks (the router's GEMV or fp32
GEMM, split-K reductions) are a row of their own. Each cell: median slowdown (kernels). The last rows are the
profile's ``memory_latency`` curves at the middle of each band, for comparison; nothing here is fitted.

    PYTHONPATH=. python benchmarks/latency_classes.py [RUN ...] [--eager-run DIR] [--profile P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import layer_overlap as lo
from overlap_windows import is_grouped_gemm

from simulator.errors import InputError, print_or_fail
from simulator.kineto.replay import load_host
from simulator.placement import latency_class
from simulator.profile import Profile, load_profile

MEASUREMENTS = Path(__file__).resolve().parents[1] / "calibration" / "measurements" / "h200" / "2026-12-03"
DEFAULT_RUNS = (MEASUREMENTS / "layer_traces", MEASUREMENTS / "layer_traces_heldout")
DEFAULT_EAGER = MEASUREMENTS / "eager_traces"
BANDS = (0.1, 0.3, 0.5, 0.7, 0.9, 1.01)  # upper edges of the HBM-share bands
GEMV = "GEMM kernels of light blocks"
SMALL_TOKENS = (1, 2, 4)


def band(share: float) -> int:
    return next(i for i, edge in enumerate(BANDS) if share < edge)


def band_label(i: int) -> str:
    low = 0.0 if i == 0 else BANDS[i - 1]
    return f"≥ {low:.1f}" if i == len(BANDS) - 1 else f"{low:.1f}–{BANDS[i]:.1f}"


def eager_demands(trace: Path) -> dict[tuple[str, int], tuple[float, bool]]:
    """(kernel name, occurrence) → (HBM share it draws alone, whether it is a GEMM kernel of light blocks), first
    layer call of a sequential eager trace."""
    _, _, host = load_host(trace, None, None, None, False)
    seen: Counter[str] = Counter()
    out: dict[tuple[str, int], tuple[float, bool]] = {}
    for item in host.items:
        if item.gpu is None or item.kind != "launch":
            continue
        name = item.gpu.name
        key = (name, seen[name])
        seen[name] += 1
        demand = item.demand
        out.setdefault(key, (demand.bw, demand.blocks is not None and (demand.blocks_per_sm or 1) > 1))
    return out


def slowdowns(run: Path, eager: Path) -> list[tuple[str, float, float]]:
    """(class, HBM share beside it, slowdown) of every routing-chain kernel of every layer of ``run`` at 1/2/4
    tokens that the eager run traced too."""
    records = {(r["preset"], r["tokens"], r["strategy"]): r for r in lo.load_kernel_records(run)
               if r["mode"] == "graph"}
    out = []
    for (preset, tokens, strategy), sequential in sorted(records.items()):
        multi = records.get((preset, tokens, "multi_stream"))
        trace = eager / "traces" / f"{preset}_t{tokens}_sequential_eager.json.gz"
        if strategy != "sequential" or tokens not in SMALL_TOKENS or multi is None or not trace.is_file():
            continue
        demands = eager_demands(trace)
        replays = lo.replays_per_trace(run / sequential["trace"])  # both strategies traced alike (one command)
        alone: dict[tuple[str, int], list[float]] = defaultdict(list)
        for layer in lo.layers_of(sequential, replays):
            for key, k in lo.keyed(layer).items():
                alone[key].append(k["dur_us"])
        for layer in lo.layers_of(multi, replays):
            aux = lo.aux_stream(layer)
            kernels = list(lo.keyed(layer).items())
            grouped = [k["start_us"] for _, k in kernels if k["stream"] != aux and is_grouped_gemm(k["name"])]
            if not grouped:
                continue
            beside = [(key, k) for key, k in kernels if k["stream"] == aux]
            for key, k in kernels:
                if k["stream"] == aux or k["start_us"] >= min(grouped) or key not in alone or k["dur_us"] <= 0:
                    continue
                start, end = k["start_us"], k["start_us"] + k["dur_us"]
                share = sum(max(0.0, min(end, a["start_us"] + a["dur_us"]) - max(start, a["start_us"])) / (end - start)
                            * demands.get(akey, (0.0, False))[0] for akey, a in beside)
                cls = GEMV if demands.get(key, (0.0, False))[1] else latency_class(key[0])
                out.append((cls, share, k["dur_us"] / statistics.median(alone[key])))
    return out


def markdown(rows: list[tuple[str, float, float]], profile: Profile, runs: list[Path]) -> str:
    if not rows:
        raise InputError("no routing-chain kernel with an eager trace of its point")
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    for cls, share, slow in rows:
        cells[(cls, band(share))].append(slow)
    classes = ["gather", GEMV, "softmax", "topk", "sort"]
    head = "| kernel class | " + " | ".join(f"HBM share {band_label(i)}" for i in range(len(BANDS))) + " |"
    lines = [f"Routing-chain kernels of {', '.join(r.name for r in runs)} at 1/2/4 tokens beside the shared experts: "
             f"median slowdown (kernels) per share of the HBM ceiling the aux kernels draw meanwhile; "
             f"{len(rows)} kernels. Last rows: {profile.describe()}'s memory_latency curves at each band's middle "
             f"(the placement probe's; {GEMV} take the gather curve).", "", head,
             "| --- |" + " ---: |" * len(BANDS)]
    for cls in classes:
        row = [f"{statistics.median(v):.2f} ({len(v)})" if (v := cells.get((cls, i))) else "–"
               for i in range(len(BANDS))]
        lines.append(f"| {cls} | " + " | ".join(row) + " |")
    curve = profile.memory_latency
    if curve is not None:
        mids = [(0.0 if i == 0 else BANDS[i - 1]) / 2 + min(BANDS[i], 1.0) / 2 for i in range(len(BANDS))]
        for cls in ("gather", "softmax", "topk", "sort"):
            lines.append(f"| profile: {cls} | " + " | ".join(f"{curve.slowdown(m, cls):.2f}" for m in mids) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="layer-trace runs (sequential and multi_stream graph traces; default calls 19 and 24)")
    ap.add_argument("--eager-run", type=Path, default=DEFAULT_EAGER,
                    help=f"run with the sequential eager traces of the same points (default {DEFAULT_EAGER})")
    ap.add_argument("--profile", default="h200", help="profile whose memory_latency curves are shown (default h200)")
    args = ap.parse_args(argv)

    def report() -> str:
        rows = [row for run in args.runs for row in slowdowns(run, args.eager_run)]
        return markdown(rows, load_profile(args.profile), args.runs)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
