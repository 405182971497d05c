"""``benchmarks/time_spread.py`` on hand-made bench runs: how far the same case lies apart between two runs of one
call and of different calls, and the multi_stream gain apart, against figures computed by hand; bad input is one
line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

# µs of (mode, strategy) in three runs: A and B of call 1, C of call 2 (one preset, one token count)
TIMES = {
    "A": {("graph", "sequential"): 100.0, ("graph", "multi_stream"): 90.0,
          ("eager", "sequential"): 500.0, ("eager", "multi_stream"): 550.0},
    "B": {("graph", "sequential"): 101.0, ("graph", "multi_stream"): 90.9,
          ("eager", "sequential"): 600.0, ("eager", "multi_stream"): 660.0},
    "C": {("graph", "sequential"): 102.0, ("graph", "multi_stream"): 91.8,
          ("eager", "sequential"): 400.0, ("eager", "multi_stream"): 400.0},
}


def _run(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    cases = [{"preset": "deepseek_v3", "tokens": 1, "strategy": strategy, "mode": mode, "median_us": us}
             for (mode, strategy), us in TIMES[name].items()]
    (folder / "cases.json").write_text(json.dumps(cases))
    return folder


def _rows(tmp_path: Path) -> dict[tuple[str, str], dict[str, float]]:
    spread = load_benchmark("time_spread")
    runs = [("1", _run(tmp_path, "A")), ("1", _run(tmp_path, "B")), ("2", _run(tmp_path, "C"))]
    return {(r["mode"], r["pairing"]): r for r in spread.spread(runs)["rows"]}


def test_spread_within_and_across_calls(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    same = rows[("eager", "same call")]  # A vs B: 500/600 - 1 and 550/660 - 1, both -1/6
    assert same["run_pairs"] == 1 and same["comparisons"] == 2
    assert same["median"] == pytest.approx(1 / 6, abs=1e-4) and same["worst"] == pytest.approx(1 / 6, abs=1e-4)
    other = rows[("eager", "other calls")]  # A vs C: 0.25, 0.375; B vs C: 0.5, 0.65
    assert other["run_pairs"] == 2 and other["comparisons"] == 4
    assert other["median"] == pytest.approx((0.375 + 0.5) / 2, abs=1e-4) and other["worst"] == pytest.approx(0.65)
    # eager gains: A -10 %, B -10 %, C 0 % -> 0 points apart within call 1, 10 points across calls
    assert same["gain_median_points"] == pytest.approx(0.0, abs=1e-3)
    assert other["gain_median_points"] == pytest.approx(10.0, abs=1e-3)
    graph = rows[("graph", "other calls")]  # graph gains all 10 %: times 1 % and 2 % apart
    assert graph["gain_p90_points"] == pytest.approx(0.0, abs=1e-3)
    assert graph["worst"] == pytest.approx(2 / 102, abs=1e-5)  # A vs C: |100 / 102 - 1|


def test_widest_eager_case_first(tmp_path: Path) -> None:
    spread = load_benchmark("time_spread")
    runs = [("1", _run(tmp_path, "A")), ("1", _run(tmp_path, "B")), ("2", _run(tmp_path, "C"))]
    widest = spread.spread(runs)["widest"]
    assert [(w["strategy"], w["spread"]) for w in widest] == [("multi_stream", 0.65), ("sequential", 0.5)]
    assert widest[0]["us"] == [550.0, 660.0, 400.0]


def test_bad_input_is_one_line_and_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spread = load_benchmark("time_spread")
    assert spread.main(["no-call-given"]) == 2
    assert spread.main([f"1={tmp_path / 'missing'}", f"2={tmp_path / 'missing'}"]) == 2
    assert spread.main([f"1={_run(tmp_path, 'A')}"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("error: ") for line in errors)
