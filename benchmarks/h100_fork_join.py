"""The H100 profile's graph fork/join cost, carried from the H200 or measured on the H100, scored on the H100's runs.

The shipped ``h100`` profile carries ``host.graph_join_us`` from the H200. ``calibration.carry --graph-corun RUN``
takes it from a graph co-run run measured on the H100 instead (``calibration.carry.with_graph_join``, the H200
profile's held-out presets left out). Per H100 run, both profiles' predicted multi_stream gains against the
measured ones: the mean of predicted − measured (bias, points), the share of 1–4-token points within ±1.5 points,
and the regret of each profile's choices beside always multi_stream's (margin 0.5 %). Nothing is fitted to the
runs. Not run on AMD hardware.

    PYTHONPATH=. python benchmarks/h100_fork_join.py [--graph-corun RUN] [RUN ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from calibration.carry import with_graph_join
from simulator.decisions import POLICIES, score
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile
from simulator.validation import gain_points

H100 = Path("calibration/measurements/h100")
GRAPH_CORUN = H100 / "2026-12-07" / "graph_corun" / "graph_corun.json.gz"
DEFAULT_RUNS = (H100 / "2026-12-05" / "layer_traces_small", H100 / "2026-12-05" / "layer_traces_large",
                H100 / "2026-12-06" / "layout_means", H100 / "2026-12-06" / "ranks_unseen",
                H100 / "2026-12-06" / "layer_traces_unseen", H100 / "2026-12-07" / "layer_traces_unseen_large")
MARGIN = 0.005


def with_measured_join(profile: Profile, graph_corun: Path) -> Profile:
    """``profile`` with the fork/join cost the graph co-runs at ``graph_corun`` measure, as ``calibration.carry
    --graph-corun`` takes it (the H200's held-out presets left out)."""
    doc = profile.model_dump()
    with_graph_join(doc, graph_corun, load_profile("h200"))
    return Profile.model_validate(doc)


def row(label: str, profile: Profile, run: Path) -> str:
    points = gain_points(profile, [run])
    if not points:
        raise InputError(f"{run}: no (preset, tokens) with both strategies measured in graph mode")
    off = np.array([100 * (p.predicted_gain - p.measured_gain) for p in points])
    small = np.array([p.tokens <= 4 for p in points])
    within = f"{int((np.abs(off[small]) <= 1.5).sum())}/{int(small.sum())}" if small.any() else "–"
    scores = {s.policy: s for s in score(points, MARGIN, {k: POLICIES[k] for k in ("model", "always")})}
    model, always = scores["model"], scores["always"]
    return (f"| {run.relative_to(H100) if run.is_relative_to(H100) else run} | {label} | {len(points)} | "
            f"{off.mean():+.2f} | {within} | {100 * model.mean:.2f} / {100 * model.worst:.2f} | "
            f"{100 * always.mean:.2f} / {100 * always.worst:.2f} |")


def markdown(runs: list[Path], graph_corun: Path) -> str:
    carried = load_profile("h100")
    measured = with_measured_join(carried, graph_corun)
    lines = [f"Profiles: {carried.describe()}; fork/join carried: {carried.host.graph_join_us.value:.2f} µs; "
             f"measured on the H100: {measured.host.graph_join_us.value:.2f} µs "
             f"({measured.host.graph_join_us.source}). Not run on AMD hardware.", "",
             "| run | fork/join | points | bias (points) | 1–4 tokens within ±1.5 | model regret mean / worst | "
             "always mean / worst |", "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for run in runs:
        lines.append(row(f"carried {carried.host.graph_join_us.value:.2f} µs", carried, run))
        lines.append(row(f"measured {measured.host.graph_join_us.value:.2f} µs", measured, run))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS), help="H100 runs (default: all six)")
    p.add_argument("--graph-corun", type=Path, default=GRAPH_CORUN, help="the H100's graph_corun.json.gz")
    args = p.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs, args.graph_corun))


if __name__ == "__main__":
    sys.exit(main())
