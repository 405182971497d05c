"""cuBLAS's dot-product GEMV router beside the shared experts in the layer traces, against block placement's floor.

The fp32 router of few experts runs at one token as cuBLAS's ``dot_kernel``: hundreds of four-warp blocks, 16 per
SM. In a multi_stream graph layer it starts while the shared experts' GEMM holds most SMs with full-SM blocks. Block
placement (``simulator.placement``) packs the blocks that fit onto the free SMs for life and ends the kernel no
sooner than their packing slowdown (``packing_slowdown``, with the warps an SM runs at full speed that the profile
gives this kernel) times its solo time: a floor on its slowdown. Per traced point of the H200 layer-trace sets (the
design set and the held-out ones) whose router is a ``dot_kernel`` started beside full-SM blocks: whether all its
blocks fit on the free SMs, how long after its start the full-SM blocks kept holding their SMs, its measured
slowdown (median over the replayed layers of its time in the multi_stream layer over its time in the sequential
one) and the floor. A floor above the measured slowdown is a law the trace contradicts.

    PYTHONPATH=. python benchmarks/packed_gemv.py [RUN ...] [--profile P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from calibration.layer_traces import (
    Kernel,
    aux_stream,
    launch_geometry,
    layers_of,
    load_kernel_records,
    router_position,
)
from simulator.errors import InputError, print_or_fail
from simulator.placement import packing_slowdown, placement_for
from simulator.profile import Profile, load_profile

H200 = Path(__file__).resolve().parents[1] / "calibration" / "measurements" / "h200" / "2026-12-03"
DEFAULT_RUNS = tuple(H200 / name for name in ("layer_traces", "layer_traces_heldout", "layer_traces_heldout2",
                                               "layer_traces_heldout3", "layer_traces_heldout4"))
SM_COUNT = 132  # the H200's
CONTRADICTED = 1.05  # a floor more than 5 % above the measured slowdown


class Point(NamedTuple):
    run: str
    preset: str
    tokens: int
    blocks: int
    free: int
    all_fit: bool
    held_us: float  # how long after the router's start the full-SM blocks kept their SMs
    measured: float
    floor: float


def holders(layer: list[Kernel], at: int) -> list[Kernel]:
    """The aux-stream kernels of full-SM blocks running when kernel ``at`` starts."""
    aux, start = aux_stream(layer), layer[at]["start_us"]
    return [k for k in layer if k["stream"] == aux and k["start_us"] <= start < k["start_us"] + k["dur_us"]
            and launch_geometry(k)[1] == 1]


def dot_issue_warps(profile: Profile) -> float:
    """The warps an SM runs at full speed that block placement gives a ``dot_kernel`` under ``profile``."""
    issue = placement_for(profile).warps_at_full_speed("dot_kernel")
    if issue is None:
        raise InputError(f"profile {profile.name}: no issue_warps (block placement's packing law needs it)")
    return issue


def points(runs: Sequence[Path], profile: Profile) -> list[Point]:
    issue = dot_issue_warps(profile)
    out = []
    for run in runs:
        records = {(r["preset"], r["tokens"], r["strategy"]): r for r in load_kernel_records(run)
                   if r["mode"] == "graph"}
        for (preset, tokens, strategy), record in sorted(records.items()):
            seq = records.get((preset, tokens, "sequential"))
            if strategy != "multi_stream" or seq is None:
                continue
            layers, seq_layers = layers_of(record, 1)[1:], layers_of(seq, 1)[1:]
            at = router_position(layers[0])
            if at is None or "dot_kernel" not in layers[0][at]["name"]:
                continue
            kernel = layers[0][at]
            held = holders(layers[0], at)
            free = SM_COUNT - sum(min(launch_geometry(k)[0], SM_COUNT) for k in held)
            if not held or free < 1:
                continue
            seq_at = next(i for i, k in enumerate(seq_layers[0]) if k["name"] == kernel["name"])
            measured = (statistics.median(layer[at]["dur_us"] for layer in layers)
                        / statistics.median(layer[seq_at]["dur_us"] for layer in seq_layers))
            blocks, per_sm, warps = launch_geometry(kernel)
            floor = packing_slowdown(blocks, warps, free, SM_COUNT, issue, per_sm)
            until = max(k["start_us"] + k["dur_us"] for k in held)
            out.append(Point(run.name, str(preset), int(tokens), blocks, free, blocks <= free * per_sm,
                             until - kernel["start_us"], measured, floor))
    if not out:
        raise InputError("no traced dot_kernel router beside full-SM blocks in these runs")
    return out


def markdown(runs: Sequence[Path], profile: Profile) -> str:
    table = points(runs, profile)
    lines = [f"Profile: {profile.describe()}; warps an SM runs at full speed for this kernel: "
             f"{dot_issue_warps(profile):g}. Not run on AMD "
             "hardware.", "",
             "| run | preset | tokens | blocks | free SMs | all packed | SMs held for (µs) | measured slowdown "
             "| floor |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    lines += [f"| {p.run} | {p.preset} | {p.tokens} | {p.blocks} | {p.free} | {'yes' if p.all_fit else 'no'} | "
              f"{p.held_us:.1f} | {p.measured:.2f}× | {p.floor:.2f}× |" for p in table]
    broken = [p for p in table if p.floor > p.measured * CONTRADICTED]
    lines += ["", f"Floor above the measured slowdown (by more than 5 %): {len(broken)} of {len(table)} points "
                  f"({sum(p.all_fit for p in broken)} of them with every block packed)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="layer-trace runs (default: the five H200 sets of 2026-12-03)")
    ap.add_argument("--profile", default="h200", help="profile (default h200)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs, load_profile(args.profile)))


if __name__ == "__main__":
    sys.exit(main())
