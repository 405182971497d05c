"""Does the grouped GEMM's weight layout change its time, and how far does it move between machine starts?

The microbench measured the routed experts' grouped GEMMs with their weights held ``[E, K, N]`` until 2026-12-04,
while kernels_real's layer holds them ``[E, N, K]`` and passes them transposed. Call 46 measured every grouped
GEMM shape in both layouts, one right after the other (``python -m calibration.microbench --only grouped
--grouped-ab``); call 45, on another machine start the same day, the layer's layout alone; call 1 (2026-12-02,
the start the solo tables and the layer cases of ``moesim validate`` come from), the old layout. Per weight shape
this prints the median and the largest |ratio − 1| over its token counts of: the layer's layout against the old
one within call 46 (the layout's effect), the layer's layout in call 46 against call 45 (two starts, one day),
and the old layout in call 46 against call 1 (two starts, two days apart).

    python benchmarks/grouped_layouts.py [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from calibration.microbench.shapes import GROUPED_WEIGHTS, LEGACY_GROUPED_WEIGHTS
from simulator.errors import InputError, print_or_fail

ROOT = Path(__file__).resolve().parents[1] / "calibration" / "measurements" / "h200"
CALL1 = ROOT / "2026-12-02/microbench/microbench.json.gz"
CALL45 = ROOT / "2026-12-04/microbench_grouped/microbench.json.gz"
CALL46 = ROOT / "2026-12-04/microbench_grouped_ab/microbench.json.gz"

Key = tuple[int, int, int, tuple[int, ...]]  # K, N, tokens, counts


def grouped_times(path: Path, weights: str) -> dict[Key, tuple[str, float]]:
    """(tag, median µs) per grouped GEMM shape of a microbench document held in ``weights`` (records without the
    field: the old layout)."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        solo = json.loads(raw)["solo"]
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: not a microbench document ({type(err).__name__}: {err})") from None
    out = {}
    for r in solo:
        s = r["shape"]
        if s["op"] == "grouped_mm" and s.get("weights", LEGACY_GROUPED_WEIGHTS) == weights and r.get("median_us"):
            out[(s["K"], s["N"], s["tokens"], tuple(s["counts"]))] = (str(s["tag"]), float(r["median_us"]))
    return out


def _stats(ratios: list[float]) -> tuple[float, float]:
    dev = [abs(r - 1) for r in ratios]
    return statistics.median(dev), max(dev)


def comparisons() -> list[dict[str, Any]]:
    """Per weight shape: (median, max) |ratio − 1| of the three comparisons over the shared token counts."""
    new46, old46 = grouped_times(CALL46, GROUPED_WEIGHTS), grouped_times(CALL46, LEGACY_GROUPED_WEIGHTS)
    new45, old1 = grouped_times(CALL45, GROUPED_WEIGHTS), grouped_times(CALL1, LEGACY_GROUPED_WEIGHTS)
    rows = []
    tags = {k[:2]: tag for k, (tag, _) in new46.items()}  # (K, N) → the shape's tag
    for kn in sorted(tags, key=tags.__getitem__):
        keys = [k for k in new46 if k[:2] == kn and k in old46 and k in new45 and k in old1]
        if not keys:
            continue
        rows.append({"shape": new46[keys[0]][0], "K": kn[0], "N": kn[1], "points": len(keys),
                     "layout": _stats([new46[k][1] / old46[k][1] for k in keys]),
                     "starts_same_day": _stats([new46[k][1] / new45[k][1] for k in keys]),
                     "starts_two_days": _stats([old46[k][1] / old1[k][1] for k in keys]),
                     "old_to_new_mean": statistics.mean(old46[k][1] / old1[k][1] for k in keys) - 1})
    if not rows:
        raise InputError("no grouped GEMM shape measured in all three calls")
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    def pair(x: tuple[float, float]) -> str:
        return f"{x[0]:.1%} / {x[1]:.1%}"

    out = ["Median / largest |ratio − 1| over each shape's token counts (1 … 1024 tokens).", "",
           "| grouped GEMM | K × N | points | layer's layout vs old, one run (call 46) | layer's layout, "
           "calls 46 vs 45 (two starts, one day) | old layout, call 46 vs call 1 (two starts, two days) | "
           "call 46 vs call 1, mean |",
           "| --- | --- | ---: | --- | --- | --- | ---: |"]
    for r in rows:
        out.append(f"| {r['shape']} | {r['K']} × {r['N']} | {r['points']} | {pair(r['layout'])} | "
                   f"{pair(r['starts_same_day'])} | {pair(r['starts_two_days'])} | {r['old_to_new_mean']:+.1%} |")
    out += ["", f"Over all {sum(r['points'] for r in rows)} points: the layout's median effect "
            f"{statistics.median(r['layout'][0] for r in rows):.1%}; two starts a day apart "
            f"{statistics.median(r['starts_same_day'][0] for r in rows):.1%}; two starts two days apart "
            f"{statistics.median(r['starts_two_days'][0] for r in rows):.1%} (median of the shapes' medians)."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="the comparisons as JSON")
    args = p.parse_args(argv)
    return print_or_fail(lambda: json.dumps(comparisons(), indent=1) if args.json else markdown(comparisons()))


if __name__ == "__main__":
    sys.exit(main())
