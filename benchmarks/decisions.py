"""Score the simulator's multi_stream decisions on measured graph-mode layer times.

For every (preset or rank variant, token count) of the given bench runs that has both strategies measured in
graph mode, the simulator predicts the multi_stream gain over sequential under ``--profile``; a policy then
picks a strategy and its regret is scored (``simulator.decisions``). Prints the policies' mean and worst
regret, whether the model beats each trivial policy, and the 1/2/4-token gains (measured vs predicted).

``--reference-run`` names the same matrix measured again (another run, e.g. on another machine start): it adds
the policy ``measured_elsewhere`` (choose by that measurement) and says how often that measurement's 1/2/4-token gains
fall within the tolerance of these runs' — the floor set by the measurement's own reproducibility. Only the
points measured in both are scored then.

    PYTHONPATH=. python benchmarks/decisions.py --run kernels_real9 --run kernels_real --profile h200
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from simulator.decisions import POLICIES, GainPoint, Policy, measured_elsewhere, score, scores_table, verdict
from simulator.errors import InputError, print_or_fail
from simulator.profile import load_profile
from simulator.validation import gain_points, measured_gains

MEASUREMENTS = Path("calibration/measurements/h200/2026-12-02")
SMALL_TOKENS = (1, 2, 4)
GAIN_TOLERANCE = 0.015


def points_of(runs: list[str], profile_name: str,
              reference: dict[tuple[str, int], float] | None = None) -> list[GainPoint]:
    """The runs' measured and predicted gains; with a reference, only the points it measured too."""
    bar = tqdm(desc="predicting", disable=not sys.stderr.isatty())
    points = gain_points(load_profile(profile_name), folders(runs), progress=lambda: bar.update(1))
    bar.close()
    if reference is not None:
        points = [p for p in points if (p.preset, p.tokens) in reference]
    if not points:
        raise InputError("no (preset, tokens) with both strategies measured in graph mode"
                         + (" in both the runs and the reference" if reference is not None else ""))
    return points


def folders(runs: list[str]) -> list[Path]:
    return [MEASUREMENTS / run if (MEASUREMENTS / run).is_dir() else Path(run) for run in runs]


def reference_gains(runs: list[str] | None) -> dict[tuple[str, int], float] | None:
    """The measured gains of the reference runs (the same matrix measured again), or None without any."""
    if not runs:
        return None
    gains = measured_gains(folders(runs))
    if not gains:
        raise InputError(f"--reference-run {' '.join(runs)}: no (preset, tokens) with both strategies in graph mode")
    return gains


def policies(reference: dict[tuple[str, int], float] | None) -> dict[str, Policy]:
    return POLICIES if reference is None else {**POLICIES, "measured_elsewhere": measured_elsewhere(reference)}


def time_lines(points: list[GainPoint]) -> list[str]:
    """The layer times' |predicted / measured − 1| (sequential and multi_stream graphs), all points and at 1/2/4
    tokens; nothing where the points carry no times."""
    def stats(subset: list[GainPoint]) -> str:
        errors = np.abs([e for p in subset for e in p.time_errors])
        return f"median {np.median(errors):.1%}, p90 {np.percentile(errors, 90):.1%} ({len(errors)} layer times)"
    small = [p for p in points if p.tokens in SMALL_TOKENS and p.time_errors]
    timed = [p for p in points if p.time_errors]
    if not timed:
        return []
    return [f"Layer times (sequential and multi_stream graphs), |predicted / measured − 1|: {stats(timed)}"
            + (f"; at {', '.join(map(str, SMALL_TOKENS))} tokens {stats(small)}." if small else ".")]


def markdown(points: list[GainPoint], margin: float, profile: str, runs: list[str],
             reference: dict[tuple[str, int], float] | None = None, reference_runs: list[str] | None = None) -> str:
    scores = score(points, margin, policies(reference))
    lines = [f"Runs: {', '.join(runs)} (graph mode, {len(points)} points; a point in several runs: the mean of "
             f"their medians). Profile: {profile}. "
             f"Margin {100 * margin:.1f} %."]
    if reference is not None:
        lines += ["", f"Reference (the same matrix measured again): {', '.join(reference_runs or [])}; only the points "
                      "measured in both are scored."]
    lines += ["", *scores_table(scores)]
    lines += ["", *[f"- {line}" for line in verdict(scores)], ""]
    small = [p for p in points if p.tokens in SMALL_TOKENS]
    within = sum(abs(p.predicted_gain - p.measured_gain) <= GAIN_TOLERANCE for p in small)
    lines += [f"At {', '.join(map(str, SMALL_TOKENS))} tokens: predicted gain within ±{100 * GAIN_TOLERANCE:.1f} "
              f"points of measured in {within}/{len(small)}.", *time_lines(points)]
    if reference is None:
        lines += ["", "| preset | tokens | measured gain | predicted gain | off by (points) |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {p.preset} | {p.tokens} | {100 * p.measured_gain:+.1f} % | {100 * p.predicted_gain:+.1f} % | "
                  f"{100 * (p.predicted_gain - p.measured_gain):+.1f} |" for p in small]
        return "\n".join(lines)
    again = sum(abs(reference[(p.preset, p.tokens)] - p.measured_gain) <= GAIN_TOLERANCE for p in small)
    lines += [f"The reference measurement's gain within ±{100 * GAIN_TOLERANCE:.1f} points of these runs' in "
              f"{again}/{len(small)} (the reproducibility floor).", "",
              "| preset | tokens | measured gain | measured elsewhere | predicted gain | off by (points) |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {p.preset} | {p.tokens} | {100 * p.measured_gain:+.1f} % | "
              f"{100 * reference[(p.preset, p.tokens)]:+.1f} % | {100 * p.predicted_gain:+.1f} % | "
              f"{100 * (p.predicted_gain - p.measured_gain):+.1f} |" for p in small]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True,
                    help=f"bench output folder (a folder under {MEASUREMENTS}, or a path); repeat to pool runs")
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--margin", type=float, default=0.005, help="gain multi_stream must predict (fraction)")
    ap.add_argument("--reference-run", action="append",
                    help="the same matrix measured again, e.g. on another machine start (repeat to pool): adds the "
                         "policy measured_elsewhere and the reproducibility floor")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def report() -> str:
        reference = reference_gains(args.reference_run)
        points = points_of(args.run, args.profile, reference)
        if not args.json:
            return markdown(points, args.margin, load_profile(args.profile).describe(), args.run, reference,
                            args.reference_run)
        return json.dumps({"profile": args.profile, "margin": args.margin,
                           "scores": [s.to_json_dict() for s in score(points, args.margin, policies(reference))],
                           "points": [vars(p) | ({} if reference is None else
                                                 {"measured_elsewhere": reference[(p.preset, p.tokens)]})
                                      for p in points]}, indent=1)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
