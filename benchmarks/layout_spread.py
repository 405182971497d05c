"""How much of a measured multi_stream gain belongs to the memory layout: the layout probe's A/A test.

Reads ``kernels_real.layout_probe`` runs: per preset × tokens × strategy, graphs on two copies of the weights
(the same values at other addresses) × two captures (intermediates at other addresses), all timed interleaved,
each traced once. Nothing else differs between the graphs of a strategy. Prints:

- per point, the multi_stream gain of each layout (copy, capture), their spread, and the kernel whose duration
  moves most between the layouts of a strategy (median over the traced layers, each trace's first layer dropped);
- how far apart two layouts' gains are at 1/2/4 tokens, and where they disagree on the sign;
- decisions scored against the **layout mean** (the mean of the four layouts' medians, per strategy): the
  regret of choosing by one layout's measurement (each of them, #1 the first in (copy, capture) order: the floor a
  single measurement sets), of
  the simulator's shape path (``--profile``), and of the trivial policies.

    PYTHONPATH=. python benchmarks/layout_spread.py calibration/measurements/h200/2026-12-03/layout_probe \\
        calibration/measurements/h200/2026-12-03/layout_probe_v3
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from simulator.decisions import POLICIES, measured_elsewhere, score, scores_table
from simulator.errors import InputError, print_or_fail
from simulator.kineto.overlay import occurrence_keys
from simulator.profile import load_profile
from simulator.validation import gain_points, load_cases

DEFAULT_RUNS = (Path("calibration/measurements/h200/2026-12-03/layout_probe"),
                Path("calibration/measurements/h200/2026-12-03/layout_probe_v3"))
SIGN_BAR = 0.01  # a gain counts as a sign when |gain| exceeds 1 %
Layout = tuple[int, int]  # (weights copy, capture)
Point = tuple[str, int]  # (preset, tokens)


def layout_times(runs: list[Path]) -> dict[Point, dict[str, dict[Layout, float]]]:
    """(preset, tokens) → strategy → layout → median µs per layer."""
    out: dict[Point, dict[str, dict[Layout, float]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        for case in load_cases(run, eager_rerun=False):
            if "weights_copy" not in case or "capture" not in case:
                raise InputError(f"{run}: case records without weights_copy / capture (not a layout_probe run)")
            layout = (int(case["weights_copy"]), int(case["capture"]))
            out[(str(case["preset"]), int(case["tokens"]))][str(case["strategy"])][layout] = float(case["median_us"])
    return {point: dict(per) for point, per in sorted(out.items())}


def layout_gains(times: dict[str, dict[Layout, float]]) -> dict[Layout, float]:
    seq, ms = times["sequential"], times["multi_stream"]
    return {layout: 1 - ms[layout] / seq[layout] for layout in sorted(seq) if layout in ms}


def short_name(name: str) -> str:
    if "GroupProblemShape" in name:
        return "routed grouped GEMM (CUTLASS sm90, torch._grouped_mm)"
    return name.removeprefix("void ")[:48]


def moving_kernels(runs: list[Path]) -> dict[Point, tuple[str, float, float]]:
    """(preset, tokens) → the kernel whose median duration moves most between layouts of one strategy: its
    name, its range (µs) and its smallest median (µs); none from a timing-only run (``--no-trace``)."""
    durations: dict[tuple[Point, str, tuple[str, int]], dict[Layout, list[float]]] = defaultdict(dict)
    for run in runs:
        path = run / "kernels.json.gz"
        if not path.is_file():
            continue
        for record in json.loads(gzip.decompress(path.read_bytes())):
            kernels, layers = record["kernels"], int(record["layers"])
            size = len(kernels) // layers
            point = (str(record["preset"]), int(record["tokens"]))
            layout = (int(record["weights_copy"]), int(record["capture"]))
            for i in range(1, layers):  # a replay's first layer runs apart (see layer_overlap's notes)
                layer = kernels[i * size:(i + 1) * size]
                for key, kernel in zip(occurrence_keys([k["name"] for k in layer], size), layer, strict=True):
                    durations[(point, record["strategy"], key)].setdefault(layout, []).append(kernel["dur_us"])
    best: dict[Point, tuple[str, float, float]] = {}
    for (point, _, key), per in durations.items():
        medians = [statistics.median(xs) for xs in per.values()]
        moved = max(medians) - min(medians)
        if point not in best or moved > best[point][1]:
            best[point] = (short_name(key[0]), moved, min(medians))
    return best


def decisions_section(runs: list[Path], gains: dict[Point, dict[Layout, float]], profile_name: str,
                      margin: float) -> list[str]:
    """Regret against the layout mean: one layout's measurement, the shape path, the trivial policies."""
    profile = load_profile(profile_name)
    points = gain_points(profile, runs)
    count = min(len(per) for per in gains.values())  # layouts in (copy, capture) order, as many as every point has
    policies = dict(POLICIES) | {f"one layout (#{i + 1})": measured_elsewhere({p: list(g.values())[i]
                                                                                for p, g in gains.items()})
                                 for i in range(count)}
    lines = [f"Decisions against the layout mean ({len(points)} points, margin {100 * margin:.1f} %; the model: "
             f"the shape path under {profile.describe()}):", "", *scores_table(score(points, margin, policies))]
    within = sum(abs(p.predicted_gain - p.measured_gain) <= 0.015 for p in points if p.tokens <= 4)
    small = sum(p.tokens <= 4 for p in points)
    lines += ["", f"The shape path's predicted gain within ±1.5 points of the layout mean at ≤ 4 tokens: "
              f"{within} of {small}."]
    return lines


def markdown(runs: list[Path], profile_name: str | None, margin: float) -> str:
    times = layout_times(runs)
    gains = {point: layout_gains(per) for point, per in times.items()}
    moving = moving_kernels(runs)
    lines = ["| preset | tokens | gain per layout (copy,capture: 0,0 0,1 1,0 1,1; one copy: its captures) | "
             "spread (points) | A/A, "
             "sequential / multi_stream | kernel moving most between layouts (range, µs / its time) |",
             "| --- | ---: | --- | ---: | --- | --- |"]
    spreads, split = [], []
    for point, per in gains.items():
        values = list(per.values())
        spreads.append(max(values) - min(values))
        if max(values) > SIGN_BAR and min(values) < -SIGN_BAR:
            split.append(f"{point[0]} t{point[1]}")
        aa = [100 * (max(t.values()) / min(t.values()) - 1) for t in (times[point]["sequential"],
                                                                      times[point]["multi_stream"])]
        name, moved, base = moving.get(point, ("", 0.0, 0.0))
        lines.append(f"| {point[0]} | {point[1]} | " + " ".join(f"{100 * g:+.1f}" for g in values)
                     + f" | {100 * spreads[-1]:.1f} | {aa[0]:.1f} % / {aa[1]:.1f} % | "
                     + (f"{name} ({moved:.1f} / {base:.1f}) |" if name else "not traced |"))
    pairs = [abs(a - b) for per in gains.values() for i, a in enumerate(per.values())
             for b in list(per.values())[i + 1:]]
    lines += ["", f"Two layouts' gains apart (all pairs, {len(pairs)}): median {100 * statistics.median(pairs):.1f} "
              f"points, worst {100 * max(pairs):.1f}; within ±1.5 points: {sum(d <= 0.015 for d in pairs)} of "
              f"{len(pairs)}. Spread per point: median {100 * statistics.median(spreads):.1f}, worst "
              f"{100 * max(spreads):.1f} points. Layouts disagree on the sign (|gain| > 1 % both ways) at "
              f"{len(split)} of {len(gains)} points" + (f": {', '.join(split)}." if split else ".")]
    if profile_name:
        lines += ["", *decisions_section(runs, gains, profile_name, margin)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="layout_probe output folders (default: the 2026-12-03 runs)")
    ap.add_argument("--profile", help="also score decisions: the shape path under this profile (e.g. h200)")
    ap.add_argument("--margin", type=float, default=0.005, help="the model's margin on predicted gain (fraction)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs, args.profile, args.margin))


if __name__ == "__main__":
    sys.exit(main())
