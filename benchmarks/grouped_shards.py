"""The routed experts' grouped GEMM in the traced layers: the simulator's solo time against the traced kernel, for
shapes with a measured table (whole experts) and for tensor-parallel shard shapes without one, costed two ways:
the grouped family's roofline (the profile without its ``grouped_shard_law``) and the whole-expert table × the
law's ratio (``simulator.cost.shard_time``).

The law is fitted on call 19's traces (``calibration.fit_grouped_law``, the calibration split); every other run is
held out. Each row: the grouped kernels (gate_up and down) of the run's sequential graph layers at their median
over the replayed layers, |simulated / traced − 1|: median, p90, worst, and the median signed error.

    PYTHONPATH=. python benchmarks/grouped_shards.py [RUN ...] [--profile P]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from calibration.fit_grouped_law import traced_points
from simulator.cost import kernel_cost
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile

MEASUREMENTS = Path(__file__).resolve().parents[1] / "calibration" / "measurements"
CALIBRATION_RUN = "layer_traces"  # call 19: the law's fit
DEFAULT_RUNS = tuple(MEASUREMENTS / "h200" / "2026-12-03" / name for name in (
    CALIBRATION_RUN, "layer_traces_heldout", "layer_traces_heldout2", "layer_traces_heldout3",
    "layer_traces_heldout4"))


def without_law(profile: Profile) -> Profile:
    """The same profile with no shard law: shard shapes take the grouped family's roofline."""
    return profile.model_copy(update={"grouped_shard_law": None})


def errors(points: list, profile: Profile) -> np.ndarray:
    return np.array([kernel_cost(spec, profile).dur_us / us - 1.0 for spec, us in points])


def cell(e: np.ndarray) -> str:
    if not len(e):
        return "– | – | – | –"
    a = np.abs(e)
    return f"{np.median(a):.1%} | {np.percentile(a, 90):.1%} | {a.max():.0%} | {np.median(e):+.1%}"


def markdown(runs: list[Path], profile: Profile) -> str:
    if profile.grouped_shard_law is None:
        raise InputError(f"profile {profile.name} has no grouped_shard_law (moesim calibrate --decode fits it)")
    plain = without_law(profile)
    lines = [f"Profile: {profile.describe()}. Shard law: {profile.grouped_shard_law.fixed_us:.2f} µs per kernel + "
             f"{profile.grouped_shard_law.round_us:.2f} µs per round of {profile.grouped_shard_law.slots} tiles + "
             f"weights at {profile.grouped_shard_law.stream_GBps:.0f} GB/s ({profile.grouped_shard_law.source}). "
             "Not run on AMD hardware.", "",
             "| run | split | shapes | kernels | costed as | median \\|error\\| | p90 | worst | median signed |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    pooled: dict[str, list[np.ndarray]] = {"roofline": [], "law": []}
    for run in runs:
        points = traced_points(run, profile)
        if not points:
            raise InputError(f"{run}: no traced grouped kernel")
        split = "calibration (the law's fit)" if run.name == CALIBRATION_RUN else "held out"
        whole = [p for p in points if p[0].table in profile.kernel_tables]
        shard = [p for p in points if p[0].table not in profile.kernel_tables]
        lines.append(f"| {run.name} | {split} | whole experts | {len(whole)} | measured table | "
                     f"{cell(errors(whole, profile))} |")
        for label, model in (("family roofline", plain), ("table × shard law", profile)):
            e = errors(shard, model)
            lines.append(f"| {run.name} | {split} | TP shards | {len(shard)} | {label} | {cell(e)} |")
            if run.name != CALIBRATION_RUN:
                pooled["roofline" if model is plain else "law"].append(e)
    for key, label in (("roofline", "family roofline"), ("law", "table × shard law")):
        e = np.concatenate(pooled[key]) if pooled[key] else np.array([])
        lines.append(f"| all held out | held out | TP shards | {len(e)} | {label} | {cell(e)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="layer-trace runs (default: call 19 and the four held-out sets of 2026-12-03)")
    ap.add_argument("--profile", default="h200", help="profile (default h200)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs, load_profile(args.profile)))


if __name__ == "__main__":
    sys.exit(main())
