"""How much the routing chain's latency-bound kernels slow beside the shared experts, by kernel class and by the
share of the HBM ceiling the shared experts draw meanwhile: measured in the layer's graph traces, against the
curves the profile keeps (since session 21 measured the same way in call 19's layer traces:
``calibration.fit_latency_in_situ``; before, the placement probe's).

The slowdowns are ``calibration.fit_latency_in_situ.slowdowns``'s (its docstring says how they are read); here
the GEMM kernels of light blocks (the router's GEMV or fp32 GEMM, split-K reductions) are a row of their own.
Each cell: median slowdown (kernels). The last rows are the profile's ``memory_latency`` curves at the middle of
each band, for comparison; nothing here is fitted.

    PYTHONPATH=. python benchmarks/latency_classes.py [RUN ...] [--eager-run DIR] [--profile P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.fit_latency_in_situ import BANDS, GEMV, band, band_middle, slowdowns
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile

MEASUREMENTS = Path(__file__).resolve().parents[1] / "calibration" / "measurements" / "h200" / "2026-12-03"
DEFAULT_RUNS = (MEASUREMENTS / "layer_traces", MEASUREMENTS / "layer_traces_heldout")
DEFAULT_EAGER = MEASUREMENTS / "eager_traces"


def band_label(i: int) -> str:
    low = 0.0 if i == 0 else BANDS[i - 1]
    return f"≥ {low:.1f}" if i == len(BANDS) - 1 else f"{low:.1f}–{BANDS[i]:.1f}"


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
             f"({GEMV} take the gather curve).", "", head,
             "| --- |" + " ---: |" * len(BANDS)]
    for cls in classes:
        row = [f"{statistics.median(v):.2f} ({len(v)})" if (v := cells.get((cls, i))) else "–"
               for i in range(len(BANDS))]
        lines.append(f"| {cls} | " + " | ".join(row) + " |")
    curve = profile.memory_latency
    if curve is not None:
        mids = [band_middle(i) for i in range(len(BANDS))]
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
