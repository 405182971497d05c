"""Score the simulator's multi_stream decisions on measured graph-mode layer times.

For every (preset or rank variant, token count) of the given bench runs that has both strategies measured in
graph mode, the simulator predicts the multi_stream gain over sequential under ``--profile``; a policy then
picks a strategy and its regret is scored (``simulator.decisions``). Prints the policies' mean and worst
regret, whether the model beats each trivial policy, and the 1/2/4-token gains (measured vs predicted).

    PYTHONPATH=. python benchmarks/decisions.py --run kernels_real9 --run kernels_real --profile h200
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from simulator.decisions import GainPoint, score, verdict
from simulator.errors import InputError
from simulator.profile import load_profile
from simulator.validation import gain_points

MEASUREMENTS = Path("calibration/measurements/h200/2026-12-02")
SMALL_TOKENS = (1, 2, 4)
GAIN_TOLERANCE = 0.015


def points_of(runs: list[str], profile_name: str) -> list[GainPoint]:
    folders = [MEASUREMENTS / run if (MEASUREMENTS / run).is_dir() else Path(run) for run in runs]
    bar = tqdm(desc="predicting", disable=not sys.stderr.isatty())
    points = gain_points(load_profile(profile_name), folders, progress=lambda: bar.update(1))
    bar.close()
    return points


def markdown(points: list[GainPoint], margin: float, profile: str, runs: list[str]) -> str:
    scores = score(points, margin)
    lines = [f"Runs: {', '.join(runs)} (graph mode, {len(points)} points; a point in several runs: the mean of "
             f"their medians). Profile: {profile}. "
             f"Margin {100 * margin:.1f} %.", "", "| policy | mean regret (points) | worst (points) | worst at | "
             "chose multi_stream |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {s.policy} | {100 * s.mean:.2f} | {100 * s.worst:.2f} | {s.worst_at} | {s.chose_multi_stream}/{s.n} |"
              for s in scores]
    lines += ["", *[f"- {line}" for line in verdict(scores)], ""]
    small = [p for p in points if p.tokens in SMALL_TOKENS]
    within = sum(abs(p.predicted_gain - p.measured_gain) <= GAIN_TOLERANCE for p in small)
    lines += [f"At {', '.join(map(str, SMALL_TOKENS))} tokens: predicted gain within ±{100 * GAIN_TOLERANCE:.1f} "
              f"points of measured in {within}/{len(small)}.", "",
              "| preset | tokens | measured gain | predicted gain | off by (points) |",
              "| --- | --- | --- | --- | --- |"]
    lines += [f"| {p.preset} | {p.tokens} | {100 * p.measured_gain:+.1f} % | {100 * p.predicted_gain:+.1f} % | "
              f"{100 * (p.predicted_gain - p.measured_gain):+.1f} |" for p in small]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True,
                    help=f"bench output folder (a folder under {MEASUREMENTS}, or a path); repeat to pool runs")
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--margin", type=float, default=0.005, help="gain multi_stream must predict (fraction)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        points = points_of(args.run, args.profile)
        if not points:
            raise InputError("no (preset, tokens) with both strategies measured in graph mode")
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"profile": args.profile, "margin": args.margin,
                          "scores": [s.to_json_dict() for s in score(points, args.margin)],
                          "points": [vars(p) for p in points]}, indent=1))
    else:
        print(markdown(points, args.margin, load_profile(args.profile).describe(), args.run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
