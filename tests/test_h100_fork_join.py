"""benchmarks/h100_fork_join.py: the H100 profile with its carried and its measured fork/join cost, side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

fork_join = load_benchmark("h100_fork_join")


def test_measured_profile_differs_only_in_the_fork_join_cost() -> None:
    carried = fork_join.load_profile("h100")
    measured = fork_join.with_measured_join(carried, fork_join.GRAPH_CORUN)
    assert measured.host.graph_join_us.source.startswith("measured (")
    assert measured.host.graph_join_us.value != carried.host.graph_join_us.value
    assert measured.model_copy(update={"host": carried.host}) == carried


def test_one_row_per_profile_per_run() -> None:
    run = fork_join.H100 / "2026-12-06" / "layer_traces_unseen"
    text = fork_join.markdown([run], fork_join.GRAPH_CORUN)
    rows = [line for line in text.splitlines() if line.startswith("| 2026-12-06/layer_traces_unseen |")]
    assert [r.split("|")[2].split()[0] for r in rows] == ["carried", "measured"]
    assert "Not run on AMD hardware" in text


def test_missing_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fork_join.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
