"""``benchmarks/decisions.py`` with a reference measurement: the policy of the other machine start is scored on
the points both measured, and a reference without graph pairs is a one-line input error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03"


def _script():
    return load_benchmark("decisions")


def test_reference_run_adds_the_measured_elsewhere_policy(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    assert script.main(["--run", str(RUNS / "kernels_real10"), "--reference-run", str(RUNS / "kernels_real9"),
                        "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by = {s["policy"]: s for s in report["scores"]}
    reference = script.measured_gains([RUNS / "kernels_real9"])
    picks = sum(reference[(p["preset"], p["tokens"])] > report["margin"] for p in report["points"])
    assert by["measured_elsewhere"]["chose_multi_stream"] == picks
    for p in report["points"]:
        assert p["measured_elsewhere"] == reference[(p["preset"], p["tokens"])]


def test_a_reference_without_graph_pairs_is_an_input_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cases.json").write_text("[]")
    assert _script().main(["--run", str(RUNS / "kernels_real10"), "--reference-run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --reference-run") and err.count("\n") == 1


def test_layer_time_line_by_hand() -> None:
    from simulator.decisions import GainPoint

    script = _script()
    points = [GainPoint("a", 1, 0.1, 0.1, (0.10, -0.20)), GainPoint("a", 64, 0.0, 0.0, (0.01, 0.03)),
              GainPoint("b", 2, 0.0, 0.0)]  # no times: left out
    (line,) = script.time_lines(points)
    # all four |errors| 0.01, 0.03, 0.10, 0.20: median 6.5 %; at 1/2/4 tokens 0.10, 0.20: median 15 %
    assert "median 6.5%" in line and "(4 layer times)" in line
    assert "at 1, 2, 4 tokens median 15.0%" in line and "(2 layer times)" in line
    assert script.time_lines([GainPoint("b", 2, 0.0, 0.0)]) == []
