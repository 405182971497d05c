"""The shape path given the launch geometry of each point's own trace: the traced cuBLAS / CUTLASS grids, with block
placement.

The shape path (``moesim sweep`` / ``thresholds`` / ``validate``) builds the layer from shapes; where the profile
recorded no launch for a GEMM it shares the device by the profile's form (``benchmarks/recorded_geometry.py`` scores
it with the launches recorded). Here every point traced as a multi_stream CUDA-graph layer
(``kernels_real.bench --trace-timed-graphs``) is simulated three ways at 1, 2 and 4 tokens: by the profile's own
form, without launches; with block placement (``simulator.placement``) but no geometry; and with block placement and the
geometry of that point's traced GEMM kernels (blocks, blocks per SM from registers / shared memory / threads,
warps per block, and the kernel's name, which picks its latency and issue class). The predicted multi_stream gain
of each against the measured gain (the timed graphs of the rank-variant matrix, as the decisions blocks
read them), and, per run, how often cuBLAS chose
a different grid for the same GEMM on another GPU of the same chip (``--other``: the H100's traces).

    PYTHONPATH=. python benchmarks/shape_geometry.py
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibration.layer_traces import launch_geometry, layer_gemms, layers_of, load_kernel_records
from simulator.decisions import GainPoint, score
from simulator.errors import InputError, print_or_fail
from simulator.ir import Launch
from simulator.placement import placement_for
from simulator.profile import Profile, load_profile
from simulator.validation import GRAPH_REPLAYS, graph_pairs, replayed_layer_us
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset

H200 = Path("calibration/measurements/h200/2026-12-03")
RUNS = (H200 / "layer_traces", H200 / "layer_traces_heldout", H200 / "layer_traces_heldout2")
TIMED = (H200 / "kernels_real9", H200 / "kernels_real9_repeat")  # the decisions blocks' runs
OTHER = Path("calibration/measurements/h100/2026-12-05/layer_traces_small")
SHARED = ("shared_gemm_gate_up", "shared_gemm_down", "shared_gate_gemm")
GROUPED = ("grouped_mm_gate_up", "grouped_mm_down")
TOLERANCE = 0.015
MARGIN = 0.005  # the decisions scripts' default

Geometry = dict[str, tuple[tuple[int, int, int], str]]  # launch name → ((blocks, per SM, warps), kernel name)


def traced_geometry(runs: Sequence[Path]) -> dict[tuple[str, int], Geometry]:
    """(preset, tokens) → the shape path's GEMM launch names → their traced geometry and kernel name, read off
    the second layer of the multi_stream graph trace (aux stream: the shared experts' GEMMs in order; main
    stream: the router's GEMM first; the grouped GEMMs in order)."""
    out: dict[tuple[str, int], Geometry] = {}
    for run in runs:
        for record in load_kernel_records(run):
            if record["strategy"] != "multi_stream" or record["mode"] != "graph":
                continue
            split = layers_of(record, 1)
            shared, router, grouped = layer_gemms(split[1] if len(split) > 1 else split[0])
            pairs = [*zip(SHARED, shared, strict=False), *zip(("router_gemm",), router, strict=False),
                     *zip(GROUPED, grouped, strict=False)]
            out[(str(record["preset"]), int(record["tokens"]))] = {
                name: (launch_geometry(k), str(k["name"])) for name, k in pairs}
    return out


def with_geometry(program: Any, geometry: Geometry) -> Any:
    """The program with each named GEMM launch given its traced geometry and kernel name."""
    ops = []
    for op in program.ops:
        if isinstance(op, Launch) and op.kernel in geometry:
            (blocks, per_sm, warps), name = geometry[op.kernel]
            op = op.model_copy(update={"blocks": blocks, "blocks_per_sm": per_sm, "warps_per_block": warps,
                                       "kernel": name})
        ops.append(op)
    return program.model_copy(update={"ops": tuple(ops)})


def layer_us(profile: Profile, case: dict[str, Any], sharing: Any, geometry: Geometry | None) -> float:
    """Simulated µs per layer of a graph case, as ``simulator.validation.predict_case`` times it."""
    layers = int(case.get("layers_per_replay") or 1)
    program = moe_layer_program(get_preset(str(case["preset"])), int(case["tokens"]), str(case["strategy"]),
                                profile, mode="graph", iterations=GRAPH_REPLAYS, layers_per_graph=layers,
                                touched=case.get("touched_experts"))
    return replayed_layer_us(program if geometry is None else with_geometry(program, geometry), sharing, layers)


def rows(profile: Profile, tokens: Sequence[int]) -> list[tuple[str, int, float, float, float, float]]:
    """(preset, tokens, measured, shape path, placement, placement + traced geometry) gains per point."""
    geometry = traced_geometry(RUNS)
    own, placing = profile.sharing_model(), placement_for(profile)
    out = []
    for (preset, t), cases in graph_pairs(TIMED).items():
        if t not in tokens or (preset, t) not in geometry:
            continue
        seq, ms = cases["sequential"], cases["multi_stream"]
        gains = [1 - layer_us(profile, ms, sharing, geo) / layer_us(profile, seq, sharing, geo)
                 for sharing, geo in ((own, None), (placing, None), (placing, geometry[(preset, t)]))]
        out.append((preset, t, 1 - ms["median_us"] / seq["median_us"], *gains))
    if not out:
        raise InputError("no traced point of the timed runs at these token counts")
    return out


def grid_changes(first: Sequence[Path], other: Path) -> tuple[int, int]:
    """(GEMM launches whose kernel or block count differs, launches compared) between two GPUs' traces."""
    a, b = traced_geometry(first), traced_geometry([other])
    compared = differ = 0
    for key in set(a) & set(b):
        for name in set(a[key]) & set(b[key]):
            compared += 1
            (geo_a, kernel_a), (geo_b, kernel_b) = a[key][name], b[key][name]
            differ += geo_a[0] != geo_b[0] or kernel_a != kernel_b
    return differ, compared


def markdown(profile_name: str = "h200", tokens: Sequence[int] = (1, 2, 4)) -> str:
    profile = load_profile(profile_name)
    table = rows(profile, tokens)
    forms = ("the profile's own form (no launches)", "block placement, no geometry", "block placement, traced geometry")
    lines = [f"Profile: {profile.describe()}. Traces: {', '.join(map(str, RUNS))}; measured gains: "
             f"{', '.join(map(str, TIMED))} (graph; a point in both runs: the mean of their medians). Tokens: "
             f"{', '.join(map(str, tokens))}. Regret: multi_stream where the predicted gain exceeds "
             f"{100 * MARGIN:.1f} % (always multi_stream: the last row).", "",
             "| sharing | points | gain off, median (points) | worst | within ±1.5 points | regret, mean / worst |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for i, form in enumerate(forms):
        errors = [abs(r[3 + i] - r[2]) * 100 for r in table]
        model, always = score([GainPoint(r[0], r[1], r[2], r[3 + i]) for r in table], MARGIN)[:2]
        lines.append(f"| {form} | {len(errors)} | {statistics.median(errors):.2f} | {max(errors):.2f} | "
                     f"{sum(e <= TOLERANCE * 100 + 1e-9 for e in errors)} | {100 * model.mean:.2f} / "
                     f"{100 * model.worst:.2f} |")
    lines.append(f"| always multi_stream | {len(table)} | – | – | – | {100 * always.mean:.2f} / "
                 f"{100 * always.worst:.2f} |")
    lines += ["", "| preset | tokens | measured | profile's form | placement | placement + geometry |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {p} | {t} | {m:+.1%} | {a:+.1%} | {b:+.1%} | {c:+.1%} |" for p, t, m, a, b, c in table]
    differ, compared = grid_changes(RUNS, OTHER)
    lines += ["", f"Another GPU of the same chip ({OTHER}): cuBLAS / CUTLASS ran another kernel or block count for "
                  f"{differ} of {compared} GEMM launches of the same points."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="h200", help="profile name or path (default h200)")
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 4], help="token counts (default 1 2 4)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.profile, args.tokens))


if __name__ == "__main__":
    raise SystemExit(main())
