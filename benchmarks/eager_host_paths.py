"""Which eager host model predicts held-out eager layers best: the shipped profile's (microbench per-op host
costs × one scale fitted to the calibration split's eager layer times), the per-op host costs measured
profiler-free in a host-timed run (``moesim calibrate --eager-host RUN``) without and with the extra cost of a
launch onto an idle stream (``host.idle_launch_us``, read from the run's host-bound calibration cases:
``calibration.fit_host.fit_idle_launch``). Each is scored by ``moesim validate``'s eager figures on the held-out
cases of the host-timed run and of another machine start's eager run of the same protocol.

    PYTHONPATH=. python benchmarks/eager_host_paths.py [--run RUN] [--other RUN] [--profile h200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from calibration.fit import with_host_costs
from calibration.fit_host import idle_launch_excess
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile
from simulator.validation import evaluate, load_cases, recorded_holdout, resolve, split_of

RUN = "calibration/measurements/h200/2026-12-05/host_costs"
OTHER = "calibration/measurements/h200/2026-12-02/kernels_real_eager2"


def paths(profile: Profile, run: str) -> dict[str, Profile]:
    """The three host models, each on ``profile``'s split."""
    measured = with_host_costs(profile, resolve(run), *recorded_holdout(profile), [], lambda *_: None)
    no_idle = measured.model_copy(update={"host": measured.host.model_copy(update={"idle_launch_us": None})})
    return {"microbench × fitted scale (shipped)": profile, "per-op, measured": no_idle,
            "per-op, measured + idle launches": measured}


def eager_cases(run: str) -> list[dict[str, Any]]:
    return [c for c in load_cases(run, eager_rerun=False) if c.get("mode") == "eager" and c.get("device") != "cpu"]


def excess_by_strategy(profile: Profile, run: str) -> dict[str, list[float]]:
    """Per strategy, the host-bound calibration cases' steady call minus host-only time, per launch (µs)."""
    split = recorded_holdout(profile)
    calib = [c for c in eager_cases(run) if split_of(c, *split) == "calibration"]
    out: dict[str, list[float]] = {}
    for case, excess in idle_launch_excess(calib, profile):
        out.setdefault(str(case["strategy"]), []).append(excess)
    return out


def markdown(profile: Profile, run: str, other: str) -> str:
    models = paths(profile, run)
    idle = models["per-op, measured + idle launches"].host.idle_launch_us
    by = excess_by_strategy(profile, run)
    idle_line = (f"Launch onto an idle stream: +{idle.value:.2f} µs ({idle.source})." if idle else
                 "Launch onto an idle stream: not measured (no host-bound case).")
    per_strategy = ", ".join(f"{s} {statistics.median(v):.2f} ({len(v)} cases)" for s, v in sorted(by.items()))
    lines = [f"Host-timed run: `{run}`; other machine start: `{other}`. Profile: {profile.describe()}; held-out "
             "split as recorded in it. Not run on AMD hardware.", "",
             f"{idle_line} Per strategy, median µs per launch: {per_strategy}.", "",
             "| eager host model | this run: held-out median / p90 | calibration split | "
             "other start: held-out median / p90 | calibration split |", "| --- | --- | --- | --- | --- |"]
    runs = (eager_cases(run), eager_cases(other))
    split = recorded_holdout(profile)
    for name, model in models.items():
        cells = []
        for cases in runs:
            entry = evaluate(model, cases, *split)["per_mode"]["eager"]
            cal = entry["calibration_split"]
            cells += [f"{100 * entry['median_abs_error']:.1f} % / {100 * entry['p90_abs_error']:.1f} %",
                      f"{100 * cal['median_abs_error']:.1f} % / {100 * cal['p90_abs_error']:.1f} %"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default=RUN, help=f"host-timed bench run (default {RUN})")
    ap.add_argument("--other", default=OTHER, help=f"eager run of another machine start (default {OTHER})")
    ap.add_argument("--profile", default="h200")
    args = ap.parse_args(argv)

    def report() -> str:
        for path in (args.run, args.other):
            if not resolve(path).is_dir():
                raise InputError(f"{path}: no such folder")
        return markdown(load_profile(args.profile), args.run, args.other)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
