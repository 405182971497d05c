"""Latency-bound kernels' slowdown under the others' HBM load, from the placement probe (calls 22–23).

``python -m calibration.microbench.placement_probe --op topk|softmax|sort|gather`` ran each of the routing
chain's latency-bound kernels beside shared-expert GEMMs of several shapes inside CUDA graphs. Per shared GEMM,
its HBM share is its weight bytes over its solo kernel time against the profile's HBM ceiling, and the slowdown
is the routing kernel's time beside it over its time alone (profiled replays), median over the four kernels,
the presets' sizes and the token counts. :func:`latency_curve` orders those points by the share and makes them
non-decreasing (a kernel does not speed up as the load grows): ``memory_latency``, pooled over the four kernels
and per kernel (the four differ by how much of their time is round trips to memory: the sort barely slows, the
gather slows most). A refit takes them only where the measurement folder has no layer traces: the profile's
curves are measured in situ since session 21 (``calibration.fit_latency_in_situ``), where the routing chain
slowed more than these probe kernels at the same HBM share.
Nothing here is fitted: the points are the medians.

:func:`issue_warps` reads the same probe's fp32 router GEMMs (calls 20–21 and 34) where their light blocks were
packed onto the SMs a shared GEMM's full-SM blocks left free: the busiest SM held ceil(blocks / free SMs) of them,
more than alone (ceil(blocks / SMs)), and the router ran that many warps per SM at its slowdown; per record the
resident warps an SM runs at full speed follow (``simulator.placement.packing_slowdown``, alone below them), and
the profile keeps their median, per kernel class (``simulator.placement.issue_class``: cuBLAS's xmma kernels
apart from the rest).

The readers of a probe run live here too (``benchmarks/placement_table.py`` prints the same runs).
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.kineto.demand import op_family, resident_blocks, tracks_placement
from simulator.kineto.events import DeviceProps, GpuOp
from simulator.placement import ISSUE_CLASSES, issue_class

LATENCY_OPS = ("topk", "softmax", "sort", "gather")
ROUTER_RUNS = ("placement_probe_fp32.json.gz", "placement_probe_bf16.json.gz", "placement_probe_fp32_call34.json.gz")
# the probe's GPU as its traces' deviceProperties give it (an H200)
H200 = DeviceProps(id=0, name="NVIDIA H200", num_sms=132, max_threads_per_sm=2048, regs_per_sm=65536,
                   smem_per_sm=233472, warp_size=32)


def records(path: Path) -> list[dict[str, Any]]:
    """The records of one probe run (``placement_probe*.json.gz``)."""
    if not path.is_file():
        raise InputError(f"{path}: no such file (a placement_probe run)")
    return json.loads(gzip.decompress(path.read_bytes()))["records"]


def graph_kernels(record: dict[str, Any], graph: str) -> list[dict[str, Any]]:
    """The profiled kernels of one of the record's graphs (``S``, ``R``, ``S|R``), each as a field dict."""
    kernels = record["kernels"]
    return [dict(zip(kernels["fields"], row, strict=True)) for row in kernels["graphs"].get(graph, [])]


def shared_gemm(record: dict[str, Any]) -> dict[str, Any] | None:
    """The shared GEMM's kernel: the longest kernel of the profiled ``S`` graph."""
    rows = graph_kernels(record, "S")
    return max(rows, key=lambda r: r["dur_us"]) if rows else None


def main_kernel(record: dict[str, Any]) -> tuple[dict[str, Any], float, float]:
    """The ``R`` step's longest kernel (its first instance), and its median duration alone (``R``) and beside
    the shared GEMM (``S|R``), matched by name."""
    alone = graph_kernels(record, "R")
    kernel = max(alone, key=lambda r: r["dur_us"])
    solo = statistics.median(r["dur_us"] for r in alone if r["name"] == kernel["name"])
    beside = statistics.median(r["dur_us"] for r in graph_kernels(record, "S|R") if r["name"] == kernel["name"])
    return kernel, solo, beside


def hbm_share(record: dict[str, Any], gemm: dict[str, Any], hbm_bytes_per_us: float) -> float:
    """The shared GEMM's share of the HBM ceiling: its bf16 weight bytes (N × K × 2) over its solo kernel time."""
    return record["N"] * record["K"] * 2 / gemm["dur_us"] / hbm_bytes_per_us


def latency_curve(probe: Path, hbm_bytes_per_us: float,
                  ops: tuple[str, ...] = LATENCY_OPS) -> list[tuple[float, float]]:
    """(HBM share of the shared GEMM, median slowdown of the latency-bound kernels of ``ops`` beside it) per
    shared GEMM, in order of the share, the slowdowns made non-decreasing."""
    by_shared: dict[str, tuple[list[float], list[float]]] = {}
    for op in ops:
        for record in records(probe / f"placement_probe_{op}.json.gz"):
            gemm = shared_gemm(record)
            if gemm is None:
                continue
            _, solo, beside = main_kernel(record)
            shares, slowdowns = by_shared.setdefault(record["shared"], ([], []))
            shares.append(hbm_share(record, gemm, hbm_bytes_per_us))
            slowdowns.append(beside / solo)
    points, top = [], 1.0
    for share, slowdown in sorted((statistics.median(s), statistics.median(w)) for s, w in by_shared.values()):
        top = max(top, slowdown)
        points.append((round(min(share, 1.0), 4), round(top, 4)))
    if not points:
        raise InputError(f"{probe}: no latency-bound kernel runs of the placement probe")
    return points


def memory_latency(probe: Path, hbm_bytes_per_us: float, where: str) -> dict[str, Any]:
    """The profile's ``memory_latency`` document from the probe runs under ``probe`` (``where``: how the
    source names them): the pooled curve and one per probed kernel (``simulator.placement.latency_class``)."""
    points = latency_curve(probe, hbm_bytes_per_us)
    return {"points": points,
            "classes": {op: latency_curve(probe, hbm_bytes_per_us, (op,)) for op in LATENCY_OPS},
            "source": f"measured: the placement probe's latency-bound routing kernels (top-k, softmax, sort, gather) "
                      f"beside {len(points)} shared-expert GEMMs inside CUDA graphs ({where}); per GEMM its HBM share "
                      "(weight bytes / solo time / the HBM ceiling) and the kernels' median time beside it / alone, "
                      "made non-decreasing: pooled over the four kernels (points) and per kernel (classes; gather "
                      "stands for every kernel whose time is round trips to memory); nothing fitted"}


def gpu_op(record: dict[str, Any], kernel: dict[str, Any]) -> GpuOp:
    """A probe kernel as the trace reader's ``GpuOp`` (its name looked up in the record's name table)."""
    name = kernel["name"] if isinstance(kernel["name"], str) else record["kernels"]["names"][kernel["name"]]
    return GpuOp(kind="kernel", name=name, device=0, stream=0, ts=0.0, dur=kernel.get("dur_us", 0.0), corr=None,
                 grid=tuple(kernel["grid"]), block=tuple(kernel["block"]), regs=kernel.get("registers per thread"),
                 smem=kernel.get("shared memory"))


def blocks_per_sm(record: dict[str, Any], kernel: dict[str, Any]) -> int:
    """How many of a kernel's blocks one H200 SM holds (the occupancy rules of ``simulator.kineto.demand``)."""
    return resident_blocks(gpu_op(record, kernel), H200) or 1


def packed_warps(record: dict[str, Any]) -> tuple[str, int, int, int, float] | None:
    """For a record whose routing GEMM of light blocks was packed beside the shared GEMM's full-SM blocks:
    (its kernel's name, blocks, warps per block, SMs left free, slowdown beside the shared GEMM); None for any
    other record (a kernel that is no GEMM, whose busiest SM held no more of its blocks beside the GEMM than alone,
    or whose blocks did not all fit)."""
    gemm = shared_gemm(record)
    if gemm is None or blocks_per_sm(record, gemm) != 1:
        return None
    kernel, solo, beside = main_kernel(record)
    op = gpu_op(record, kernel)
    blocks, per_sm = math.prod(kernel["grid"]), blocks_per_sm(record, kernel)
    free = H200.num_sms - math.prod(gemm["grid"])
    if not tracks_placement(op, op_family(op, None)) or per_sm == 1 or free <= 0 or blocks > free * per_sm:
        return None
    if math.ceil(blocks / free) <= math.ceil(blocks / H200.num_sms):  # packed no denser than alone
        return None
    return op.name, blocks, -(-math.prod(kernel["block"]) // H200.warp_size), free, beside / solo


def issue_warps(probe: Path, where: str, kernel_class: str | None = None) -> dict[str, Any]:
    """The profile's ``issue_warps`` figure for the router kernels of ``kernel_class``
    (``simulator.placement.issue_class``; None: the kernels of no class): per packed record (:func:`packed_warps`)
    the warps of the router's busiest SM over its slowdown, the median."""
    estimates = []
    for run in ROUTER_RUNS:
        for record in records(probe / run):
            packed = packed_warps(record)
            if packed is None or issue_class(packed[0]) != kernel_class:
                continue
            _, blocks, warps, free, slowdown = packed
            estimates.append(math.ceil(blocks / free) * warps / max(slowdown, 1.0))
    if not estimates:
        which = "router GEMM" if kernel_class is None else f"{kernel_class} router GEMM"
        raise InputError(f"{probe}: no packed {which} in the placement probe's router runs")
    deciles = statistics.quantiles(estimates, n=10) if len(estimates) > 1 else estimates * 9
    q10, q90 = deciles[0], deciles[-1]
    return {"value": round(statistics.median(estimates), 3),
            "source": "measured: the placement probe's fp32 router GEMMs"
                      + ("" if kernel_class is None else f" of class {kernel_class} (by kernel name)")
                      + " whose light blocks were packed onto the SMs "
                      f"a shared GEMM's full-SM blocks left free ({where}; {len(estimates)} records): per record the "
                      "warps on the busiest SM (ceil(blocks / free SMs) × warps per block) over the router's "
                      f"slowdown beside the GEMM, median (p10 {q10:.2f}, p90 {q90:.2f} warps); nothing fitted"}


def issue_warps_by_kernel(probe: Path, where: str) -> dict[str, dict[str, Any]]:
    """:func:`issue_warps` per kernel class (``simulator.placement.ISSUE_CLASSES``) that the probe's router runs
    packed; a class they did not measure is left out (its kernels take the profile's ``issue_warps``)."""
    out = {}
    for cls in ISSUE_CLASSES:
        try:
            out[cls] = issue_warps(probe, where, cls)
        except InputError:
            continue
    return out
