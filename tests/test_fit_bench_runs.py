"""``calibration.fit.bench_runs``: the decode folder's bench runs are scored for decisions; the layout A/A runs
of ``kernels_real.layout_probe`` (records with ``weights_copy``) are left to ``benchmarks/layout_spread.py``."""

from __future__ import annotations

import json
from pathlib import Path

from calibration.fit import bench_runs


def _run(folder: Path, **extra: int) -> Path:
    folder.mkdir()
    (folder / "cases.json").write_text(json.dumps([{"preset": "deepseek_v3", "tokens": 1, "strategy": "sequential",
                                                     "mode": "graph", "median_us": 100.0, **extra}]))
    return folder


def test_layout_runs_are_left_out(tmp_path: Path) -> None:
    bench = _run(tmp_path / "kernels_real9")
    _run(tmp_path / "layout_probe", weights_copy=0, capture=1)
    (tmp_path / "notes").mkdir()
    assert bench_runs(tmp_path) == [bench]
