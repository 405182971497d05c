"""The grouped GEMM's shard law, fitted where the decode regime runs it: the routed experts' grouped kernels in the
layer traces of the calibration split (call 19).

Per traced point (``kernels_real.bench --trace-timed-graphs``) the sequential graph layers' two grouped kernels
(gate_up, then down: ``calibration.layer_traces.is_grouped_gemm``) are taken at their median over the replayed
layers and matched with the builder's grouped launches for the same point: their K × N shape, experts hit and rows
per expert (``simulator.workloads``'s view, as the simulator costs them). Three terms are fitted by non-negative
least squares on the relative error: µs per kernel, µs per round of output tiles over the GPU's SMs, and µs per
MB of expert weights (reported as the streaming rate in GB/s). Tensor-parallel ranks are in the split (their
shapes have no measured table), so the law is fitted on the shapes it is used for; held-out presets (and their
rank variants) are left out. No layer time and no multi_stream gain enters the fit.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from calibration.layer_traces import is_grouped_gemm, layers_of, load_kernel_records, replays_per_trace
from simulator.cost import CostModel, KernelSpec, table_dims
from simulator.errors import InputError
from simulator.profile import GroupedShardLaw, Profile, expert_weight_bytes, tile_rounds
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.moe_layer import emit_moe_layer
from simulator.workloads.presets import get_preset, split_rank_name

ROLES = ("grouped_mm_gate_up", "grouped_mm_down")
TILE_M, TILE_N = 64, 128  # the CTA tile of torch._grouped_mm's sm90 CUTLASS kernel (its mangled name, 64x128x64)


def grouped_specs(preset: str, tokens: int, profile: Profile) -> dict[str, KernelSpec]:
    """The builder's grouped-GEMM launches of the sequential layer at ``tokens``, by role."""
    builder = ProgramBuilder(name="grouped", host=profile.host_costs("eager"), cost=CostModel(profile))
    emit_moe_layer(builder, get_preset(preset), tokens, "sequential")
    return {s.name: s for s in builder.specs if s.name in ROLES}


def traced_points(run: Path, profile: Profile, holdout_presets: Sequence[str] = ()) -> list[tuple[KernelSpec, float]]:
    """(spec, median traced µs) of every grouped kernel of the run's sequential graph layers."""
    held = {get_preset(p).name for p in holdout_presets}
    points = []
    for record in load_kernel_records(run):
        preset = str(record["preset"])
        if record["strategy"] != "sequential" or split_rank_name(get_preset(preset).name)[0] in held:
            continue
        replays = replays_per_trace(run / str(record["trace"]))
        layers = [[k for k in layer if is_grouped_gemm(k["name"])] for layer in layers_of(record, replays)]
        if any(len(layer) != len(ROLES) for layer in layers):
            continue
        specs = grouped_specs(preset, int(record["tokens"]), profile)
        for i, role in enumerate(ROLES):
            if role in specs and specs[role].table:
                points.append((specs[role], statistics.median(float(layer[i]["dur_us"]) for layer in layers)))
    return points


def terms(spec: KernelSpec, slots: int) -> tuple[float, float, float]:
    """The law's three regressors for a launch: 1 (per kernel), its rounds of tiles, its expert weights in MB."""
    dims = table_dims(spec.table or "")[1]
    groups = ((spec.x, spec.count), *spec.parts)
    return (1.0, float(tile_rounds(dims["N"], groups, TILE_M, TILE_N, slots)),
            expert_weight_bytes(dims["K"], dims["N"], groups) / 1e6)


def grouped_shard_law(run: Path, where: str, profile: Profile, holdout_presets: Sequence[str] = ()) -> dict[str, Any]:
    """The profile's ``grouped_shard_law`` (a JSON-ready dict) fitted on the run's traced grouped kernels."""
    points = traced_points(run, profile, holdout_presets)
    if len(points) < 3:
        raise InputError(f"{run}: {len(points)} traced grouped kernels with a table key; the law needs 3")
    slots = profile.hardware.sm_count
    rows = np.array([terms(spec, slots) for spec, _ in points])
    measured = np.array([us for _, us in points])
    weights, _ = nnls(rows / measured[:, None], np.ones(len(points)))
    fixed, per_round, per_mb = (float(w) for w in weights)
    if per_mb <= 0:
        raise InputError(f"{run}: the grouped kernels' times do not grow with their weights; no law fitted")
    residual = np.abs(rows @ weights / measured - 1.0)
    shards = sum(spec.table not in profile.kernel_tables for spec, _ in points)
    return GroupedShardLaw(
        fixed_us=round(fixed, 4), round_us=round(per_round, 4), stream_GBps=round(1e3 / per_mb, 1),
        tile_m=TILE_M, tile_n=TILE_N, slots=slots,
        source=f"fitted to {len(points)} traced grouped GEMM kernels ({shards} of shard shapes) of the sequential "
               f"graph layers in {where} (non-negative least squares on the relative error; median |residual| "
               f"{np.median(residual):.1%}, p90 {np.percentile(residual, 90):.1%}"
               + (f"; presets held out: {sorted(holdout_presets)}" if holdout_presets else "")
               + "); no layer time or gain enters it").model_dump()
