"""``calibration.fit_latency``: the latency-bound kernels' slowdown curve from hand-made probe runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.fit_latency import (
    LATENCY_OPS,
    ROUTER_RUNS,
    issue_warps,
    issue_warps_by_kernel,
    latency_curve,
    memory_latency,
    packed_warps,
)
from simulator.errors import InputError
from simulator.profile import MemoryLatency


def _record(shared: str, gemm_us: float, alone: float, beside: float) -> dict:
    """One probe record: a shared GEMM of N × K = 1000 × 1000 bf16 (2 MB) taking ``gemm_us`` alone, and the routing
    kernel ``alone`` / ``beside`` µs."""
    fields = ["name", "dur_us", "grid", "block"]
    return {"shared": shared, "router": "a", "tokens": 2, "N": 1000, "K": 1000,
            "median_us": {"S": gemm_us, "R": alone, "S|R": gemm_us + alone},
            "kernels": {"fields": fields, "graphs": {"S": [[0, gemm_us, [96, 1, 1], [384, 1, 1]]],
                                                     "R": [[1, alone, [1, 1, 1], [128, 1, 1]]],
                                                     "S|R": [[1, beside, [1, 1, 1], [128, 1, 1]]]}}}


def _write(folder: Path, records: list[dict]) -> None:
    for op in LATENCY_OPS:
        (folder / f"placement_probe_{op}.json.gz").write_bytes(gzip.compress(json.dumps({"records": records}).encode()))


def test_points_are_shares_and_median_slowdowns_made_non_decreasing(tmp_path: Path) -> None:
    """Against a 4 MB/µs ceiling: GEMM a draws 2 MB / 1 µs = 0.5 and slows the kernels 2.0 → 3.0 (1.5×); GEMM b
    draws 2 MB / 0.625 µs = 0.8 and slows them 1.4× only: kept at 1.5 (non-decreasing); c draws 0.25, 1.1×."""
    _write(tmp_path, [_record("a", 1.0, 2.0, 3.0), _record("b", 0.625, 2.0, 2.8), _record("c", 2.0, 2.0, 2.2)])
    assert latency_curve(tmp_path, 4.0e6) == [(0.25, 1.1), (0.5, 1.5), (0.8, 1.5)]
    doc = memory_latency(tmp_path, 4.0e6, "hand-made")
    curve = MemoryLatency.model_validate(doc)
    assert curve.slowdown(0.5) == pytest.approx(1.5) and "nothing fitted" in curve.source


def test_a_missing_run_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        latency_curve(tmp_path, 4.0e6)


def test_each_probed_kernel_keeps_its_own_curve(tmp_path: Path) -> None:
    """The sort barely slows beside GEMM a (0.5 of a 4 MB/µs ceiling: 2.0 → 2.1 µs), the other three by 1.5×: the
    pooled curve is their median (1.5), the sort's own curve 1.05."""
    for op in LATENCY_OPS:
        beside = 2.1 if op == "sort" else 3.0
        (tmp_path / f"placement_probe_{op}.json.gz").write_bytes(
            gzip.compress(json.dumps({"records": [_record("a", 1.0, 2.0, beside)]}).encode()))
    curve = MemoryLatency.model_validate(memory_latency(tmp_path, 4.0e6, "hand-made"))
    assert curve.points == [(0.5, 1.5)]
    assert curve.classes["sort"] == [(0.5, 1.05)] and curve.classes["gather"] == [(0.5, 1.5)]
    assert curve.slowdown(0.5, "sort") == pytest.approx(1.05) and curve.slowdown(0.5, "elsewhere") == 1.5


def _router_record(router_blocks: int, warps: int, shared_blocks: int, alone: float, beside: float,
                   name: str = "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>") -> dict:
    """A router-run record: a shared GEMM of full-SM blocks (384 threads × 168 registers) and the router kernel of
    light blocks (``warps`` warps × 80 registers: 6 per SM) ``alone`` / ``beside`` µs."""
    fields = ["name", "dur_us", "grid", "block", "registers per thread", "shared memory"]
    shared = [0, 9.0, [shared_blocks, 1, 1], [384, 1, 1], 168, 0]
    return {"shared": "s", "router": "r", "tokens": 2, "N": 1000, "K": 1000,
            "median_us": {"S": 9.0, "R": alone, "S|R": 9.0 + alone},
            "kernels": {"names": ["shared gemm", name], "fields": fields, "graphs": {
                "S": [shared], "R": [[1, alone, [router_blocks, 1, 1], [32 * warps, 1, 1], 80, 0]],
                "S|R": [shared, [1, beside, [router_blocks, 1, 1], [32 * warps, 1, 1], 80, 0]]}}}


def test_issue_warps_from_packed_router_gemms(tmp_path: Path) -> None:
    """112 blocks of 4 warps beside 96 full-SM blocks: the busiest of the 36 free SMs holds 4 blocks, 16 warps, and
    the router ran 3.2× slower: 16 / 3.2 = 5 warps at full speed. Beside 40 (92 free): 2 blocks, 8 warps, 2×
    slower: 4. Left out: 30 blocks (one per free SM), a kernel that is no GEMM, and blocks that do not all fit."""
    packed = [_router_record(112, 4, 96, 10.0, 32.0), _router_record(112, 4, 40, 10.0, 20.0)]
    others = [_router_record(30, 4, 96, 10.0, 12.0), _router_record(112, 4, 96, 10.0, 40.0, name="elementwise"),
              _router_record(112, 4, 128, 10.0, 50.0)]
    assert [packed_warps(r) for r in others] == [None, None, None]
    assert packed_warps(packed[0])[1:] == (112, 4, 36, pytest.approx(3.2))
    for run, recs in zip(ROUTER_RUNS, (packed + others, [], []), strict=True):
        (tmp_path / run).write_bytes(gzip.compress(json.dumps({"records": recs}).encode()))
    doc = issue_warps(tmp_path, "hand-made")
    assert doc["value"] == pytest.approx(4.5) and "2 records" in doc["source"] and "nothing fitted" in doc["source"]


XMMA = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x1x1_ffma"


def test_issue_warps_per_kernel_class(tmp_path: Path) -> None:
    """An xmma router of 384 two-warp blocks (12 per SM by its registers): alone 3 per SM; beside 96 full-SM
    blocks the busiest of the 36 free SMs holds 11, 22 warps, and it ran 1.1× slower: 22 / 1.1 = 20 warps at full
    speed. It counts for its class only; the SIMT router beside it for the kernels of no class (16 / 3.2 = 5).
    Beside no full-SM block its busiest SM holds no more than alone: left out."""
    xmma = _router_record(384, 2, 96, 20.0, 22.0, name=XMMA)
    simt = _router_record(112, 4, 96, 10.0, 32.0)
    assert packed_warps(_router_record(384, 2, 0, 20.0, 20.0, name=XMMA)) is None
    assert packed_warps(xmma)[1:] == (384, 2, 36, pytest.approx(1.1))
    for run, recs in zip(ROUTER_RUNS, ([simt], [], [xmma]), strict=True):
        (tmp_path / run).write_bytes(gzip.compress(json.dumps({"records": recs}).encode()))
    assert issue_warps(tmp_path, "hand-made", "xmma")["value"] == pytest.approx(20.0)
    assert "of class xmma" in issue_warps(tmp_path, "hand-made", "xmma")["source"]
    assert issue_warps(tmp_path, "hand-made")["value"] == pytest.approx(5.0)
    assert set(issue_warps_by_kernel(tmp_path, "hand-made")) == {"xmma"}
    (tmp_path / ROUTER_RUNS[2]).write_bytes(gzip.compress(json.dumps({"records": []}).encode()))
    assert issue_warps_by_kernel(tmp_path, "hand-made") == {}  # not measured: left out, no error


def test_issue_warps_without_packed_records_is_an_input_error(tmp_path: Path) -> None:
    for run in ROUTER_RUNS:
        (tmp_path / run).write_bytes(gzip.compress(json.dumps({"records": []}).encode()))
    with pytest.raises(InputError, match="no packed router GEMM"):
        issue_warps(tmp_path, "hand-made")
    with pytest.raises(InputError, match="no packed xmma router GEMM"):
        issue_warps(tmp_path, "hand-made", "xmma")
