"""The shape path with and without the GEMM launches recorded on the GPU (``Profile.launch_geometry``).

Where the profile recorded the launch of every GEMM of a layer (kernel, blocks, blocks per SM, warps:
``calibration.fit_geometry``), the shape path shares the device by block placement
(``simulator.placement.sharing_for``); elsewhere by the profile's own form. Here the same profile is run both ways,
with its recorded launches and with none (the shape path before session 25), against its own GPU's runs:

- H200: the timed graphs of the rank-variant matrix (``kernels_real9`` and its repeat: one memory layout each),
  every token count; the layout means of every layout-means run (four layouts per point: weights copies ×
  captures), at 1, 2 and 4 tokens, and at 16;
- H100 (a GPU never calibrated: datasheet figures, the H200's kernel tables and placement figures carried, the
  launches recorded on the H100 itself): its layer-trace runs' timed graphs, and its layout means.

Per reference and model: the points, how many of them the model placed, the predicted gain's distance from the
measured one (median, worst; within ±1.5 points at ≤ 4 tokens), and the regret of multi_stream chosen where the
predicted gain exceeds the margin, beside always multi_stream and vLLM's default. Nothing is fitted to these runs.

    PYTHONPATH=. python benchmarks/recorded_geometry.py [--profile h200] [--profile h100] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.decisions import score
from simulator.errors import print_or_fail
from simulator.placement import PlacementSharing, sharing_for
from simulator.profile import Profile, load_profile
from simulator.validation import gain_points
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset

H200 = Path("calibration/measurements/h200/2026-12-03")
H100 = Path("calibration/measurements/h100")
LAYOUT_MEANS = tuple(H200 / f"layout_means{suffix}" for suffix in ("", "_heldout", "_heldout3", "_heldout4",
                                                                   "_heldout5"))
Reference = tuple[str, tuple[Path, ...], tuple[int, ...] | None]
REFERENCES: dict[str, tuple[Reference, ...]] = {
    "h200": (
        ("H200 matrix (one layout), all token counts", (H200 / "kernels_real9", H200 / "kernels_real9_repeat"), None),
        ("layout means, 1/2/4 tokens", LAYOUT_MEANS, (1, 2, 4)),
        ("layout means, 16 tokens", LAYOUT_MEANS, (16,)),
    ),
    "h100": (
        ("H100 layer-trace runs (one layout), all token counts",
         tuple(H100 / "2026-12-05" / run for run in ("layer_traces_small", "layer_traces_large",
                                                    "layer_traces_large_repeat")), None),
        ("H100 layout means, all token counts", (H100 / "2026-12-06" / "layout_means",), None),
    ),
}
MARGIN = 0.005
TOLERANCE = 0.015


def placed(profile: Profile, preset: str, tokens: int) -> bool:
    """Whether the shape path shares this point's multi_stream layer by block placement."""
    program = moe_layer_program(get_preset(preset), tokens, "multi_stream", profile, mode="graph", iterations=1)
    return isinstance(sharing_for(profile, program), PlacementSharing)


def row(label: str, profile: Profile, runs: Sequence[Path], tokens: Sequence[int] | None) -> dict[str, Any]:
    points = [p for p in gain_points(profile, runs) if tokens is None or p.tokens in tokens]
    off = [abs(p.predicted_gain - p.measured_gain) for p in points]
    small = [d for p, d in zip(points, off, strict=True) if p.tokens <= 4]
    scores = {s.policy: s for s in score(points, MARGIN)}
    return {"model": label, "points": len(points), "placed": sum(placed(profile, p.preset, p.tokens) for p in points),
            "off_median": statistics.median(off), "off_worst": max(off),
            "within": sum(d <= TOLERANCE + 1e-9 for d in small), "small": len(small),
            **{f"{name}_{k}": getattr(scores[name], k) for name in ("model", "always", "vllm_default")
               for k in ("mean", "worst", "worst_at")}}


def report(profile_name: str) -> list[dict[str, Any]]:
    profile = load_profile(profile_name)
    without = profile.model_copy(update={"launch_geometry": None})
    out = []
    for reference, runs, tokens in REFERENCES[profile_name]:
        for label, model in (("recorded launches", profile), ("none (before)", without)):
            out.append({"reference": reference, **row(label, model, runs, tokens)})
    return out


def within(r: dict[str, Any]) -> str:
    return f"{r['within']} of {r['small']}" if r["small"] else "–"


def markdown(profile_name: str) -> str:
    rows = report(profile_name)
    profile = load_profile(profile_name)
    table = profile.launch_geometry
    lines = [f"Profile: {profile.describe()}; recorded launches: "
             f"{table.source if table is not None else 'none'}. Margin {100 * MARGIN:.1f} %. Not run on AMD "
             "hardware.", "",
             "| reference | launches | points (placed) | gain off, median / worst (points) | within ±1.5 at ≤ 4 "
             "tokens | regret, model: mean / worst (at) | always | vLLM default |",
             "| --- | --- | ---: | ---: | ---: | --- | --- | --- |"]
    for r in rows:
        lines.append(
            f"| {r['reference']} | {r['model']} | {r['points']} ({r['placed']}) | {100 * r['off_median']:.2f} / "
            f"{100 * r['off_worst']:.2f} | {within(r)} | {100 * r['model_mean']:.2f} / "
            f"{100 * r['model_worst']:.2f} ({r['model_worst_at']}) | {100 * r['always_mean']:.2f} / "
            f"{100 * r['always_worst']:.2f} | {100 * r['vllm_default_mean']:.2f} / "
            f"{100 * r['vllm_default_worst']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(REFERENCES), action="append",
                    help="the profile(s) to score, each against its own GPU's runs (default: all)")
    ap.add_argument("--json", action="store_true", help="the rows as JSON")
    args = ap.parse_args(argv)
    names = args.profile or list(REFERENCES)
    if args.json:
        return print_or_fail(lambda: json.dumps({name: report(name) for name in names}, indent=2))
    return print_or_fail(lambda: "\n\n".join(markdown(name) for name in names))


if __name__ == "__main__":
    raise SystemExit(main())
