"""``benchmarks/light_beside_gemm.py``: a light kernel beside the shared GEMM, sorted by start order, on a hand-made
probe record (four steps of one forked graph)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

FIELDS = ["name", "stream", "start_us", "dur_us", "grid", "block"]
GEMM, CAST, ROUTER = 0, 1, 2  # indices into the record's kernel names


def _row(name: int, stream: int, start: float, dur: float, grid: int) -> list:
    return [name, stream, start, dur, [grid, 1, 1], [128, 1, 1]]


def _record() -> dict:
    """S: the GEMM (10 µs, 132 blocks); R: cast (2 µs alone after a slow first step) then router; S|R: four steps
    whose casts start 0.5 µs before the GEMM, 0.2 µs after, 6 µs after, and after the GEMM has ended."""
    alone = [_row(CAST, 7, 0.0, 4.0, 14), _row(ROUTER, 7, 5.0, 6.0, 28)]
    alone += [_row(CAST, 7, 20.0 * i, 2.0, 14) for i in (1, 2, 3)]
    steps = [(0.0, 0.5, 6.0), (30.0, 30.2, 8.0), (60.0, 66.0, 3.0), (90.0, 101.0, 2.0)]  # GEMM start, cast start, dur
    forked = []
    for gemm_at, cast_at, dur in steps:
        forked += [_row(GEMM, 9, gemm_at, 10.0, 132), _row(CAST, 7, cast_at, dur, 14)]
    forked[0][2] = 0.5  # step 1: the GEMM starts 0.5 µs after the cast (at 0.0)
    forked[1][2] = 0.0
    return {"shared": "big", "K": 1000, "N": 1000, "router": "p", "tokens": 2,
            "kernels": {"names": ["nvjet", "copy_kernel", "sgemm"], "fields": FIELDS,
                        "graphs": {"S": [_row(GEMM, 9, 0.0, 10.0, 132)], "R": alone, "S|R": forked}}}


def test_steps_are_paired_and_sorted_by_start_order(tmp_path: Path) -> None:
    script = load_benchmark("light_beside_gemm")
    found = list(script.steps(_record(), script.CAST, hbm_bytes_per_us=1e6))
    assert len(found) == 3  # the fourth cast started after the GEMM ended
    assert [script.order_of(s.offset_us) for s in found] == list(script.ORDERS)
    assert [s.slowdown for s in found] == pytest.approx([3.0, 4.0, 1.5])  # against 2 µs alone (first step dropped)
    assert [s.outlasted for s in found] == [False, False, False]
    assert found[0].blocks == 132 and found[0].share == pytest.approx(0.2)  # 2e6 bytes / 10 µs / 1e6 B/µs
    assert found[0].kernel == "copy_kernel"


def test_a_cast_that_ends_after_the_gemm_is_counted_as_outlasting(tmp_path: Path) -> None:
    script = load_benchmark("light_beside_gemm")
    record = _record()
    record["kernels"]["graphs"]["S|R"][5][3] = 20.0  # the third step's cast (66 µs) now ends at 86, the GEMM at 70
    assert [s.outlasted for s in script.steps(record, script.CAST, 1000.0)] == [False, False, True]


def test_a_missing_probe_run_is_a_one_line_error(tmp_path: Path) -> None:
    script = load_benchmark("light_beside_gemm")
    (tmp_path / "placement_probe_fp32.json.gz").write_bytes(gzip.compress(json.dumps({"records": []}).encode()))
    with pytest.raises(Exception, match="no such file"):
        script.probe_steps(tmp_path, 1000.0)
