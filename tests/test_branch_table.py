"""``benchmarks/branch_table.py`` on a hand-made branch-probe run: the routing head's time beside the shared GEMM
as a multiple of its time alone, the branch start, and S's grid read from the placement probe; a missing run is
one line and exit code 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark


def _run(folder: Path) -> Path:
    folder.mkdir()
    record = {"shared": "deepseek_v3", "router": "kimi_k2", "tokens": 2, "stamps_us": {
        "S": {"S end": 20.0}, "R": {"R start": 1.0, "R end": 26.0},
        "S|R": {"S end": 22.0, "R start": 1.5, "R end": 51.5}}}
    (folder / "branch_probe.json.gz").write_bytes(gzip.compress(json.dumps({"records": [record]}).encode()))
    return folder


def test_rows_from_stamps(tmp_path: Path) -> None:
    table = load_benchmark("branch_table")
    row = table.rows(table.load(_run(tmp_path / "run")), {"deepseek_v3": (96, 1)},
                     {("deepseek_v3", "kimi_k2", 2): 40.0})[0]
    assert row["head_alone_us"] == pytest.approx(25.0) and row["head_beside_us"] == pytest.approx(50.0)
    assert row["head_slowdown"] == pytest.approx(2.0) and row["branch_start_us"] == 1.5
    assert (row["shared_blocks"], row["s_end_beside_us"]) == (96, 22.0)
    assert (row["forked_end_us"], row["probe_forked_us"]) == (51.5, 40.0)  # the later of R end and S end
    assert row["unstamped_forked_us"] is None  # a run without events_us (call 36's)


def test_the_committed_run_reads_the_probe_grids() -> None:
    table = load_benchmark("branch_table")
    grids = table.shared_blocks()
    assert grids["qwen2_57b_a14b"] == (132, 1) and grids["deepseek_v3@tp8"][0] == 40
    found = table.rows(table.load(table.DEFAULT_RUN), grids, table.probe_forked_us())
    assert len(found) == 30 and all(r["shared_blocks"] and r["probe_forked_us"] for r in found)
    assert all(r["unstamped_forked_us"] for r in found)  # call 37 timed the unstamped graphs in the same process


def test_a_missing_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_benchmark("branch_table").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
