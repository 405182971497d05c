"""``benchmarks/grouped_layouts.py`` on hand-made microbench documents: the layout's effect within one run and the
drift between machine starts, against ratios computed by hand; a missing file is one line and exit code 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.microbench.shapes import GROUPED_WEIGHTS, LEGACY_GROUPED_WEIGHTS
from tests.helpers_benchmarks import load_benchmark


def _doc(path: Path, records: list[tuple[int, str | None, float]]) -> Path:
    """A microbench document of one grouped shape (K=64, N=32) at the given (tokens, weights, µs)."""
    solo = []
    for tokens, weights, us in records:
        shape = {"op": "grouped_mm", "K": 64, "N": 32, "tokens": tokens, "counts": [tokens], "tag": "X:gate_up"}
        solo.append({"shape": shape | ({"weights": weights} if weights else {}), "median_us": us})
    raw = json.dumps({"solo": solo}).encode()
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def test_layout_and_drift_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gl = load_benchmark("grouped_layouts")
    monkeypatch.setattr(gl, "CALL1", _doc(tmp_path / "c1.json", [(1, None, 100.0), (2, None, 200.0)]))
    monkeypatch.setattr(gl, "CALL45", _doc(tmp_path / "c45.json.gz", [(1, GROUPED_WEIGHTS, 90.0),
                                                                     (2, GROUPED_WEIGHTS, 200.0)]))
    monkeypatch.setattr(gl, "CALL46", _doc(tmp_path / "c46.json.gz", [
        (1, GROUPED_WEIGHTS, 99.0), (1, LEGACY_GROUPED_WEIGHTS, 90.0),
        (2, GROUPED_WEIGHTS, 198.0), (2, LEGACY_GROUPED_WEIGHTS, 180.0)]))
    (row,) = gl.comparisons()
    assert row["points"] == 2 and row["shape"] == "X:gate_up"
    assert row["layout"] == pytest.approx((0.10, 0.10))  # 99/90 and 198/180
    assert row["starts_same_day"] == pytest.approx(((0.1 + 0.01) / 2, 0.1))  # 99/90, 198/200
    assert row["starts_two_days"] == pytest.approx((0.10, 0.10))  # 90/100, 180/200
    assert row["old_to_new_mean"] == pytest.approx(-0.10)
    assert "| X:gate_up | 64 × 32 | 2 | 10.0% / 10.0% |" in gl.markdown([row])


def test_a_missing_document_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    gl = load_benchmark("grouped_layouts")
    monkeypatch.setattr(gl, "CALL46", tmp_path / "none.json.gz")
    assert gl.main([]) == 2
    assert "not a microbench document" in capsys.readouterr().err
