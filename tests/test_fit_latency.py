"""``calibration.fit_latency``: the latency-bound kernels' slowdown curve from hand-made probe runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.fit_latency import LATENCY_OPS, latency_curve, memory_latency
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
