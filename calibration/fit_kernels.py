"""Fit the cost model's per-family parameters to measured solo kernel times (numpy only).

Model (``simulator.cost.solo_time``): ``d = L + max(a·m, b·c)`` with m = bytes / (peak HBM × reach), c =
padded flops / (peak tensor × reach), reach = min(1, sm / fill_sat), a = 1 / bw_eff, b = 1 / tc_eff. For a
fixed ``fill_sat`` the model is linear in (L, a, b) once each point's bound (memory or compute) is known, so
the fit alternates: assign bounds, solve a non-negative least squares on relative errors, re-assign; the
``fill_sat`` of least error over a small grid wins.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.cost import elementwise_grid_share, gemm_grid_share, padded_flops, table_key
from simulator.profile import KernelFamily

FILL_SAT_GRID = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0)
MAX_EFF = 1.5  # efficiencies are relative to the measured copy / matmul ceilings and may exceed them a bit
MIB = 1 << 20

# microbench family -> cost-model family
FAMILY_OF = {"gemm": "gemm", "grouped_gemm": "grouped_gemm", "elementwise": "elementwise", "topk": "topk",
             "sort": "sort", "reduction": "reduction", "gather": "gather", "copy": "copy"}


@dataclass(frozen=True)
class Point:
    """One solo measurement in cost-model terms."""

    flops: float
    bytes: float
    sm: float
    rows: int | None
    dur_us: float


@dataclass(frozen=True)
class FamilyFit:
    latency_us: float
    bw_eff: float
    tc_eff: float
    fill_sat: float
    residuals: dict[str, float]
    memory_bound: int  # points on the memory side of the fitted roofline (bw_eff identifiable if > 0)
    compute_bound: int  # points on the compute side (tc_eff identifiable if > 0)


def shape_share(shape: dict[str, Any], fam: KernelFamily, sm_count: int) -> tuple[float, int | None]:
    """(SM share of the grid, GEMM rows for tile padding) of a microbench shape, computed as the workload
    builder computes them for the layer's kernels."""
    op = shape["op"]
    if op in ("mm", "mm_f32"):  # mm_f32: the fp32 router GEMM, gridded like a GEMM (rows M, depth K)
        return gemm_grid_share(shape["M"], shape["N"], fam, sm_count, depth=shape["K"]), shape["M"]
    if op == "grouped_mm":
        counts = shape["counts"]
        rows, active = sum(counts), sum(1 for c in counts if c > 0)
        per = max(1, round(rows / max(active, 1)))
        return gemm_grid_share(per, shape["N"], fam, sm_count, groups=max(active, 1), depth=shape["K"]), per
    if op in ("add", "mul", "silu", "silu_half", "mul_half"):
        elements = shape["M"] * shape["N"]
    elif op in ("topk", "softmax", "sigmoid"):
        elements = shape["M"] * shape["E"]
    elif op in ("sort", "scatter_add"):
        elements = shape["n"]
    elif op == "cumsum":
        elements = shape["E"]
    elif op in ("sum_k", "index_select", "index_add"):
        elements = shape["M"] * shape["k"] * shape["N"]
    elif op == "copy":
        elements = shape["bytes"] / 2  # bf16 elements copied
    else:
        raise ValueError(f"unknown microbench op {op!r}")
    return elementwise_grid_share(elements, fam, sm_count), None


def _nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """min ‖A x − y‖ subject to x ≥ 0, for a few unknowns: every active set is tried."""
    n = a.shape[1]
    best, best_err = np.zeros(n), float(np.sum(y**2))
    for k in range(1, n + 1):
        for cols in itertools.combinations(range(n), k):
            if not np.any(a[:, cols]):
                continue
            sol, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
            if np.any(sol < 0):
                continue
            x = np.zeros(n)
            x[list(cols)] = sol
            err = float(np.sum((a @ x - y) ** 2))
            if err < best_err:
                best, best_err = x, err
    return best


def _fit_fixed_sat(points: Sequence[Point], fill_sat: float, tile_m: int, hbm: float,
                   tensor: float) -> tuple[float, float, float, float]:
    """(L, a, b, relative rms) for one ``fill_sat``."""
    d = np.array([p.dur_us for p in points])
    reach = np.array([min(1.0, max(p.sm, 1e-6) / fill_sat) for p in points])
    m = np.array([p.bytes for p in points]) / (hbm * reach)
    c = np.array([padded_flops(p.flops, p.rows, tile_m) for p in points]) / (tensor * reach)
    a_par, b_par = 1.0, 1.0
    mem = m * a_par >= c * b_par
    x = np.zeros(3)
    for _ in range(30):
        design = np.column_stack([np.ones_like(d), np.where(mem, m, 0.0), np.where(mem, 0.0, c)]) / d[:, None]
        x = _nnls(design, np.ones_like(d))
        a_par = x[1] if x[1] > 0 else (1.0 if not mem.any() else 1.0 / MAX_EFF)
        b_par = x[2] if x[2] > 0 else 1.0
        new_mem = m * a_par >= c * b_par
        if np.array_equal(new_mem, mem):
            break
        mem = new_mem
    a_par, b_par = max(a_par, 1.0 / MAX_EFF), max(b_par, 1.0 / MAX_EFF)
    pred = x[0] + np.maximum(a_par * m, b_par * c)
    rms = float(np.sqrt(np.mean((pred / d - 1.0) ** 2)))
    return float(x[0]), float(a_par), float(b_par), rms


def fit_family(points: Sequence[Point], hbm_bytes_per_us: float, tensor_flops_per_us: float,
               tile_m: int = 64) -> FamilyFit:
    """Best (latency, bw_eff, tc_eff, fill_sat) of one family, with relative residuals."""
    pts = [p for p in points if p.dur_us > 0]
    if len(pts) < 2:
        raise ValueError("a family fit needs at least two measurements")
    best = None
    for sat in FILL_SAT_GRID:
        lat, a, b, rms = _fit_fixed_sat(pts, sat, tile_m, hbm_bytes_per_us, tensor_flops_per_us)
        if best is None or rms < best[4] - 1e-12:
            best = (sat, lat, a, b, rms)
    assert best is not None
    sat, lat, a, b, _ = best
    fam = KernelFamily(latency_us=lat, bw_eff=min(MAX_EFF, 1 / a), tc_eff=min(MAX_EFF, 1 / b), fill_sat=sat,
                       tile_m=tile_m, source="fit")
    rel = np.array([predict(fam, p, hbm_bytes_per_us, tensor_flops_per_us) / p.dur_us - 1 for p in pts])
    mem = sum(_memory_side(fam, p, hbm_bytes_per_us, tensor_flops_per_us) for p in pts)
    return FamilyFit(lat, fam.bw_eff, fam.tc_eff, sat, residual_stats(rel), mem, len(pts) - mem)


def _memory_side(fam: KernelFamily, p: Point, hbm: float, tensor: float) -> bool:
    return p.bytes / (hbm * fam.bw_eff) >= padded_flops(p.flops, p.rows, fam.tile_m) / (tensor * fam.tc_eff)


def predict(fam: KernelFamily, p: Point, hbm: float, tensor: float) -> float:
    reach = min(1.0, max(p.sm, 1e-6) / fam.fill_sat)
    return fam.latency_us + max(p.bytes / (hbm * fam.bw_eff * reach),
                                padded_flops(p.flops, p.rows, fam.tile_m) / (tensor * fam.tc_eff * reach))


def residual_stats(rel: np.ndarray) -> dict[str, float]:
    """Median / p90 / max of |relative error| and the count."""
    if rel.size == 0:
        return {"n": 0}
    absr = np.abs(rel)
    return {"n": int(rel.size), "median_abs": round(float(np.median(absr)), 4),
            "p90_abs": round(float(np.percentile(absr, 90)), 4), "max_abs": round(float(absr.max()), 4)}


def solo_points(records: Sequence[dict[str, Any]], base: dict[str, KernelFamily], sm_count: int,
                node_gap_us: float) -> dict[str, list[Point]]:
    """Group microbench ``solo`` records into cost-model points per family. Duration: the per-call graph
    period minus the node gap (the kernel's own time with L2 rotated)."""
    out: dict[str, list[Point]] = {}
    for r in records:
        fam_name = FAMILY_OF.get(r["family"])
        if fam_name is None or r.get("median_us") is None:
            continue
        shape = {"op": r["shape"]["op"], **r["shape"]}
        sm, rows = shape_share(shape, base[fam_name], sm_count)
        dur = max(r["median_us"] - node_gap_us, 0.5 * r["median_us"])
        out.setdefault(fam_name, []).append(Point(float(r["flops"]), float(r["bytes"]), sm, rows, dur))
    return out


def elems_per_block_from_grids(records: Sequence[dict[str, Any]], family: str) -> int | None:
    """Median elements per block of a family's records whose profiled grid is known (None if none)."""
    ratios = []
    for r in records:
        if r["family"] != family or not r.get("grid"):
            continue
        blocks = math.prod(int(g) for g in r["grid"])
        shape = r["shape"]
        elements = {"topk": lambda s: s["M"] * s["E"], "sort": lambda s: s["n"]}.get(
            family, lambda s: s.get("M", 1) * s.get("N", 1) * s.get("k", 1))(shape)
        if blocks > 0 and elements > 0:
            ratios.append(elements / blocks)
    return int(max(1, round(float(np.median(ratios))))) if ratios else None


def _table_entry(shape: dict[str, Any]) -> tuple[str, float, float] | None:
    """(table key, x, count) of a microbench solo shape, keyed as the workload builder keys the layer's
    kernels (``simulator.cost.table_key``); None for shapes the layer has no kernel of."""
    op = shape["op"]
    if op == "mm":
        return table_key("mm", K=shape["K"], N=shape["N"]), shape["M"], 1.0
    if op == "grouped_mm":
        counts = shape["counts"]
        active = sum(1 for c in counts if c > 0)
        return (table_key("grouped_mm", K=shape["K"], N=shape["N"]), sum(counts) / active, active) if active else None
    if op in ("silu", "mul", "add"):
        return table_key(op, N=shape["N"]), shape["M"], 1.0
    if op == "topk":
        return table_key("topk", E=shape["E"], k=shape["k"]), shape["M"], 1.0
    if op == "sort":
        return table_key("sort"), shape["n"], 1.0
    if op == "index_select":
        return table_key("index_select", N=shape["N"]), shape["M"] * shape["k"], 1.0
    return None


MERGE_X = 1.15  # table points closer than this factor in x are averaged (measurement noise, not shape)


def solo_tables(records: Sequence[dict[str, Any]], node_gap_us: float) -> dict[str, dict[str, Any]]:
    """Measured solo tables per table key: ``{"points": sorted (x, µs per count), "fixed_us": ...}``, µs =
    the graph-chain period minus the node gap, as ``solo_points`` takes it; points closer than ``MERGE_X`` in
    x are averaged. Grouped GEMMs: x = rows per active expert, µs per active expert after a fixed kernel
    cost (``_fixed_cost``)."""
    acc: dict[str, list[tuple[float, float, float]]] = {}
    for r in records:
        entry = _table_entry(r["shape"]) if r.get("median_us") else None
        if entry is None:
            continue
        key, x, count = entry
        dur = max(r["median_us"] - node_gap_us, 0.5 * r["median_us"])
        acc.setdefault(key, []).append((float(x), float(count), dur))
    out = {}
    for key, rows in sorted(acc.items()):
        fixed = _fixed_cost(rows)
        pts = sorted((x, (dur - fixed) / count) for x, count, dur in rows)
        out[key] = {"points": _merge(pts), "fixed_us": round(fixed, 4)}
    return out


def _fixed_cost(rows: Sequence[tuple[float, float, float]]) -> float:
    """Intercept of a line of duration against count over the points with x ≤ 1.5 (about one row per
    expert, ≥ 2 distinct counts), fitted to relative residuals (each point weighted by 1 / its duration, as
    the layer's errors are judged): a plain least-squares line is steered by the largest counts, and the
    curve is slightly concave, so its intercept overstated the fixed cost and the few-expert times of decode
    by up to 15 % (DeepSeek-V3's grouped GEMMs at 8 experts). Clamped to [0, half the shortest duration]; 0
    when not identifiable."""
    near = [(c, d) for x, c, d in rows if x <= 1.5]
    if len({c for c, _ in near}) < 2:
        return 0.0
    c, d = np.array(near).T
    slope, intercept = np.polyfit(c, d, 1, w=1.0 / d)
    if slope <= 0:
        return 0.0
    return float(min(max(intercept, 0.0), 0.5 * min(d for _, _, d in rows)))


def _merge(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Average runs of points whose x lie within ``MERGE_X`` of the run's first (geometric mean of x)."""
    out: list[tuple[float, float]] = []
    run: list[tuple[float, float]] = []
    for x, y in points:
        if run and x > run[0][0] * MERGE_X:
            out.append(_mean(run))
            run = []
        run.append((x, y))
    if run:
        out.append(_mean(run))
    return out


def _mean(run: Sequence[tuple[float, float]]) -> tuple[float, float]:
    xs, ys = np.array(run).T
    return float(np.exp(np.mean(np.log(xs)))), float(np.mean(ys))
