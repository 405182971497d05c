"""``benchmarks/placement_table.py``: overlap arithmetic and the shared GEMM's blocks read from a hand-made
probe record; a missing run is a one-line input error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("placement_table", ROOT / "benchmarks" / "placement_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_overlap_and_blocks() -> None:
    script = _script()
    assert script.overlap({"S": 20.0, "R": 10.0, "S|R": 45.0}) == pytest.approx(-0.5)  # slower than in sequence
    record = {"kernels": {"fields": ["name", "dur_us", "grid"], "graphs": {"S": [
        [0, 9.0, [4, 24, 1]], [1, 1.5, [64, 1, 1]]]}}}
    assert script.shared_blocks(record) == 96  # the longest kernel's grid: 4 × 24


def test_a_missing_run_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    monkeypatch.setattr(script, "RUNS", {"fp32": tmp_path / "none.json.gz", "bf16": tmp_path / "none.json.gz"})
    assert script.main([]) == 2
    assert capsys.readouterr().err.startswith("error: ")
