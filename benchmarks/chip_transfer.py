"""Kernel times carried between two GPUs of one chip (the H200's tables on the H100), against both GPUs' traces.

The same points (preset or rank variant, tokens) traced on both GPUs as sequential CUDA-graph layers
(``kernels_real.bench --trace-timed-graphs``). Per kernel role at 1 token (the shared experts' two GEMMs, the
routed experts' two grouped GEMMs), the median over the points of the second GPU's traced duration over the
first's, beside the ratio the carried profile's cost model gives for the same launch (``--profile`` over
``--reference``); the shared GEMMs' weight bytes over their duration on the first GPU say how close to its HBM
ceiling they stream. Then per token count, the sequential layer's measured time ratio (the timed graphs'
medians) beside the simulated one. With ``--solo`` (a microbench folder measured on the second GPU), every solo
shape both GPUs measured: the first GPU's time moved by the carried profile (``simulator.cost.transferred_time``)
against the second GPU's, per kernel family, beside taking the first GPU's time unchanged.

    PYTHONPATH=. python benchmarks/chip_transfer.py [--solo calibration/measurements/h100/<date>/microbench]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Sequence
from pathlib import Path

from calibration.fit import read_microbench
from calibration.fit_kernels import FAMILY_OF, shape_share
from calibration.layer_traces import is_gemm, is_grouped_gemm, layers_of, load_kernel_records, replays_per_trace
from simulator.cost import KernelSpec, transferred_time
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile
from simulator.validation import find_file, graph_pairs, predict_case
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset

H200 = Path("calibration/measurements/h200/2026-12-03")
FIRST = [H200 / "layer_traces", H200 / "layer_traces_heldout", H200 / "layer_traces_heldout2"]
SECOND = Path("calibration/measurements/h100/2026-12-05/layer_traces_small")
SECOND_TIMED = [SECOND, Path("calibration/measurements/h100/2026-12-05/layer_traces_large")]
FIRST_TIMED = [H200 / "kernels_real9"]
# the h200 profile's solo records: the full run, its grouped GEMMs remeasured in the layer's weight layout
FIRST_SOLO = (Path("calibration/measurements/h200/2026-12-02/microbench"),
              Path("calibration/measurements/h200/2026-12-04/microbench_grouped"))
ROLES = ("shared_gemm_gate_up", "shared_gemm_down", "grouped_mm_gate_up", "grouped_mm_down")


def role_durations(runs: Sequence[Path], tokens: int = 1) -> dict[str, dict[str, float]]:
    """preset → role → median traced µs of that kernel in the sequential graph layers at ``tokens``."""
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        for record in load_kernel_records(run):
            if record["strategy"] != "sequential" or int(record["tokens"]) != tokens:
                continue
            per_role: dict[str, list[float]] = {}
            for layer in layers_of(record, replays_per_trace(run / str(record["trace"]))):
                dense = [k for k in layer if is_gemm(k["name"]) and not is_grouped_gemm(k["name"])]
                grouped = [k for k in layer if is_grouped_gemm(k["name"])]
                found = [*zip(ROLES[:2], dense[:2], strict=False), *zip(ROLES[2:], grouped[:2], strict=False)]
                for role, kernel in found:
                    per_role.setdefault(role, []).append(float(kernel["dur_us"]))
            out[str(record["preset"])] = {role: statistics.median(v) for role, v in per_role.items()}
    return out


def launch_durations(profile: Profile, preset: str, tokens: int = 1) -> dict[str, float]:
    """role → the simulated solo µs of that launch in the preset's sequential layer under ``profile``."""
    program = moe_layer_program(get_preset(preset), tokens, "sequential", profile, mode="graph", iterations=1)
    return {k.kernel: k.dur_us for k in program.kernels() if k.kernel in ROLES}


def kernel_table(first: dict, second: dict, profile: Profile, reference: Profile) -> list[str]:
    """Per role, the second GPU's traced duration over the first's beside the carried model's ratio."""
    presets = sorted(set(first) & set(second))
    if not presets:
        raise InputError("no preset traced at 1 token on both GPUs")
    rows = ["| kernel (1 token) | points | measured ratio, median (range) | carried model's ratio, median | "
            "first GPU's stream rate of the weights, median (GB/s) |", "| --- | ---: | --- | ---: | ---: |"]
    here = {p: launch_durations(profile, p) for p in presets}
    there = {p: launch_durations(reference, p) for p in presets}
    for role in ROLES:
        both = [p for p in presets if role in first[p] and role in second[p]]
        if not both:
            continue
        measured = [second[p][role] / first[p][role] for p in both]
        model = [here[p][role] / there[p][role] for p in both]
        rate = "–"
        if role.startswith("shared"):
            rates = [weight_bytes(p, role) / first[p][role] / 1e3 for p in both]
            rate = f"{statistics.median(rates):.0f}"
        rows.append(f"| {role} | {len(both)} | {statistics.median(measured):.2f} ({min(measured):.2f}–"
                    f"{max(measured):.2f}) | {statistics.median(model):.2f} | {rate} |")
    return rows


def weight_bytes(preset: str, role: str) -> float:
    """The bf16 weight bytes a shared-expert GEMM streams (the activations are a few rows)."""
    dims = get_preset(preset)
    return 2.0 * dims.hidden * dims.shared_total * (2 if role == "shared_gemm_gate_up" else 1)


def layer_table(profile: Profile, reference: Profile) -> list[str]:
    """Per token count, the sequential layer's measured time ratio between the GPUs beside the simulated one."""
    first, second = graph_pairs(FIRST_TIMED), graph_pairs(SECOND_TIMED)
    by_tokens: dict[int, tuple[list[float], list[float]]] = {}
    for key in sorted(set(first) & set(second)):
        measured = second[key]["sequential"]["median_us"] / first[key]["sequential"]["median_us"]
        simulated = (predict_case(profile, second[key]["sequential"])
                     / predict_case(reference, first[key]["sequential"]))
        pair = by_tokens.setdefault(key[1], ([], []))
        pair[0].append(measured)
        pair[1].append(simulated)
    rows = ["| tokens | points | measured layer ratio, median | simulated, median |", "| ---: | ---: | ---: | ---: |"]
    rows += [f"| {t} | {len(m)} | {statistics.median(m):.3f} | {statistics.median(s):.3f} |"
             for t, (m, s) in sorted(by_tokens.items())]
    return rows


def solo_table(solo: Path, profile: Profile, reference: Profile) -> list[str]:
    """Per family, the solo shapes both GPUs measured: the carried prediction's and the unchanged first GPU's
    time's median |error| against the second GPU's measurement, and the median measured and predicted ratios; then
    the measured ratio by the bandwidth each shape drew on the first GPU (:func:`drawn_table`)."""
    origin = profile.kernel_tables_from
    if origin is None:
        raise InputError(f"{profile.name}: no kernel tables carried from another GPU (kernel_tables_from)")

    def keyed(*folders: Path) -> dict[tuple[str, str], dict]:
        """The solo records by family and shape, a later folder's taking over an earlier one's."""
        out: dict[tuple[str, str], dict] = {}
        for folder in folders:
            records = read_microbench(find_file(folder, "microbench.json", "microbench"))["solo"]
            out.update({(r["family"], repr(sorted(r["shape"].items()))): r for r in records
                        if r.get("median_us") and r["family"] in FAMILY_OF})
        return out

    first, second = keyed(*FIRST_SOLO), keyed(solo)
    gap_first, gap_second = reference.host.node_gap_us.value, profile.host.node_gap_us.value
    rows: dict[str, list[tuple[float, float, float]]] = {}
    drawn: dict[str, list[tuple[float, float]]] = {}  # family → (GB/s drawn there, measured ratio)
    for key in sorted(set(first) & set(second)):
        there, here = first[key], second[key]
        fam = profile.family(FAMILY_OF[here["family"]])
        sm, m = shape_share(here["shape"], fam, profile.hardware.sm_count)
        spec = KernelSpec("solo", FAMILY_OF[here["family"]], flops=float(here["flops"]), bytes=float(here["bytes"]),
                          sm=sm, rows=m)
        t_there = max(there["median_us"] - gap_first, 0.5 * there["median_us"])
        t_here = max(here["median_us"] - gap_second, 0.5 * here["median_us"])
        carried = transferred_time(t_there, spec, fam, origin, profile.hbm_bytes_per_us, profile.tensor_flops_per_us)
        rows.setdefault(here["family"], []).append((t_here, carried, t_there))
        drawn.setdefault(here["family"], []).append((float(there["bytes"]) / t_there / 1e3, t_here / t_there))
    if not rows:
        raise InputError(f"{solo}: no solo shape measured on both GPUs")
    out = ["| family | shapes | measured ratio, median | carried ratio, median | carried: median abs error | "
           "unchanged: median abs error |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for family, points in sorted(rows.items()):
        med = statistics.median
        out.append(f"| {family} | {len(points)} | {med(h / t for h, _, t in points):.2f} | "
                   f"{med(c / t for _, c, t in points):.2f} | {med(abs(c / h - 1) for h, c, _ in points):.1%} | "
                   f"{med(abs(t / h - 1) for h, _, t in points):.1%} |")
    return [*out, "", *drawn_table(drawn, origin.hbm_GBps, per_byte_ceiling(profile, reference))]


def per_byte_ceiling(profile: Profile, reference: Profile) -> float:
    """The second GPU's HBM ceiling on the first's measured basis: the first's, scaled by the datasheet figures."""
    datasheet = load_profile(f"{reference.name}-datasheet")
    return reference.ceilings.hbm_GBps.value * profile.ceilings.hbm_GBps.value / datasheet.ceilings.hbm_GBps.value


def drawn_table(drawn: dict[str, list[tuple[float, float]]], there: float, here: float) -> list[str]:
    """The measured ratio binned by the bandwidth each shape drew on the first GPU (bytes over its whole time),
    beside 1 + drawn × (1/here − 1/there): every byte taking the two HBM ceilings' difference longer."""
    edges = (0.0, 1000.0, 2000.0, 3000.0, 4000.0, float("inf"))
    out = ["| family | GB/s drawn on the first GPU | shapes | measured ratio, median | per-byte law at the median |",
           "| --- | --- | ---: | ---: | ---: |"]
    for family in ("gemm", "elementwise", "grouped_gemm"):
        for lo, hi in itertools.pairwise(edges):
            inside = [(b, r) for b, r in drawn.get(family, []) if lo <= b < hi]
            if not inside:
                continue
            b = statistics.median(b for b, _ in inside)
            span = f"{lo:.0f}–{hi:.0f}" if hi < float("inf") else f"≥ {lo:.0f}"
            out.append(f"| {family} | {span} | {len(inside)} | {statistics.median(r for _, r in inside):.2f} | "
                       f"{1 + b * (1 / here - 1 / there):.2f} |")
    return out


def markdown(profile_name: str = "h100", reference_name: str = "h200") -> str:
    """The report: the kernel roles' ratios at 1 token, then the layer's per token count."""
    profile, reference = load_profile(profile_name), load_profile(reference_name)
    first, second = role_durations(FIRST), role_durations([SECOND])
    head = (f"Second GPU: {profile.hardware.gpu} (profile {profile.describe()}); first: {reference.hardware.gpu} "
            f"(profile {reference.describe()}). Traces: {', '.join(map(str, FIRST))} against {SECOND}; layer times: "
            f"the timed graphs of {', '.join(map(str, FIRST_TIMED))} against {', '.join(map(str, SECOND_TIMED))}.")
    return "\n".join([head, "", *kernel_table(first, second, profile, reference), "",
                      *layer_table(profile, reference)])


def solo_markdown(solo: Path, profile_name: str = "h100", reference_name: str = "h200") -> str:
    """The solo shapes' report (``--solo``)."""
    profile, reference = load_profile(profile_name), load_profile(reference_name)
    head = (f"Second GPU: {profile.hardware.gpu} (profile {profile.describe()}); first: {reference.hardware.gpu} "
            f"(profile {reference.describe()}). Solo shapes: {' and '.join(map(str, FIRST_SOLO))} against {solo} "
            "(graph-chain periods minus each profile's node gap).")
    return "\n".join([head, "", *solo_table(solo, profile, reference)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="h100", help="the carried profile of the second GPU (default h100)")
    ap.add_argument("--reference", default="h200", help="the first GPU's calibrated profile (default h200)")
    ap.add_argument("--solo", type=Path, default=None,
                    help="a microbench folder measured on the second GPU: compare every solo shape both measured")
    args = ap.parse_args(argv)
    if args.solo is not None:
        return print_or_fail(lambda: solo_markdown(args.solo, args.profile, args.reference))
    return print_or_fail(lambda: markdown(args.profile, args.reference))


if __name__ == "__main__":
    raise SystemExit(main())
