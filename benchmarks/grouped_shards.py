"""The routed experts' grouped GEMM in the traced layers: the simulator's solo time against the traced kernel, for
shapes with a measured table (whole experts), for tensor-parallel shards of them and for shapes never measured,
the last two costed two ways: the grouped family's roofline (the profile without its ``grouped_shard_law``) and by
the law (``simulator.cost.untabled_grouped_time``: the whole-expert table × the law's ratio, or the law alone).

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
from simulator.cost import KernelSpec, kernel_cost, whole_expert_table
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


def kind(spec: KernelSpec, profile: Profile) -> str:
    """How the profile costs this launch: its own measured table, a measured whole-expert table scaled by the law
    (a TP shard), or the law alone (a shape never measured)."""
    if spec.table in profile.kernel_tables:
        return "table"
    return "shard" if whole_expert_table(spec.table or "", profile.kernel_tables) else "unmeasured"


KINDS = {"shard": ("TP shards of measured shapes", "table × shard law"),
         "unmeasured": ("shapes never measured", "shard law alone")}


def markdown(runs: list[Path], profile: Profile) -> str:
    law = profile.grouped_shard_law
    if law is None:
        raise InputError(f"profile {profile.name} has no grouped_shard_law (moesim calibrate --decode fits it)")
    plain = without_law(profile)
    lines = [f"Profile: {profile.describe()}. Shard law: {law.fixed_us:.2f} µs per kernel + {law.round_us:.2f} µs per "
             f"round of {law.slots} tiles + weights at {law.stream_GBps:.0f} GB/s ({law.source}). "
             "Not run on AMD hardware.", "",
             "| run | split | shapes | kernels | costed as | median \\|error\\| | p90 | worst | median signed |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    pooled: dict[tuple[str, str], list[np.ndarray]] = {}
    for run in runs:
        points = traced_points(run, profile)
        if not points:
            raise InputError(f"{run}: no traced grouped kernel")
        split = "calibration (the law's fit)" if run.name == CALIBRATION_RUN else "held out"
        by_kind = {k: [p for p in points if kind(p[0], profile) == k] for k in ("table", *KINDS)}
        if by_kind["table"]:
            lines.append(f"| {run.name} | {split} | whole experts | {len(by_kind['table'])} | measured table | "
                         f"{cell(errors(by_kind['table'], profile))} |")
        for k, (shapes, label) in KINDS.items():
            if not by_kind[k]:
                continue
            for name, model in (("family roofline", plain), (label, profile)):
                e = errors(by_kind[k], model)
                lines.append(f"| {run.name} | {split} | {shapes} | {len(e)} | {name} | {cell(e)} |")
                if run.name != CALIBRATION_RUN:
                    pooled.setdefault((shapes, name), []).append(e)
    for (shapes, name), parts in pooled.items():
        e = np.concatenate(parts)
        lines.append(f"| all held out | held out | {shapes} | {len(e)} | {name} | {cell(e)} |")
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
