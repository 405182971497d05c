"""``benchmarks/layout_spread.py`` on a hand-made layout-probe run: per-layout gains, their spread and the kernel
that moves between layouts, checked against figures computed by hand; a run without layouts is an input error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

# sequential / multi_stream µs per layer of the four layouts (copy, capture): 00, 01, 10, 11
SEQUENTIAL = {(0, 0): 100.0, (0, 1): 100.0, (1, 0): 110.0, (1, 1): 100.0}
MULTI_STREAM = {(0, 0): 95.0, (0, 1): 98.0, (1, 0): 99.0, (1, 1): 102.0}
# gains: 5 %, 2 %, 10 %, -2 % → spread 12 points; A/A 10 % (sequential), 102/95 - 1 = 7.4 % (multi_stream)


def _kernels(grouped_us: float) -> list[dict[str, object]]:
    """Two layers of two kernels each; the first layer is a replay's first (dropped)."""
    layer = [{"name": "shared_gemm", "start_us": 0.0, "dur_us": 10.0},
             {"name": "cutlass GroupProblemShape grouped", "start_us": 10.0, "dur_us": grouped_us}]
    return [dict(k, dur_us=999.0) if i == 1 else k for i, k in enumerate(layer)] + layer


def _run(folder: Path) -> Path:
    folder.mkdir()
    cases, kernels = [], []
    for strategy, times in (("sequential", SEQUENTIAL), ("multi_stream", MULTI_STREAM)):
        for (copy, capture), us in times.items():
            meta = {"preset": "deepseek_v3", "tokens": 2, "strategy": strategy, "mode": "graph",
                    "weights_copy": copy, "capture": capture}
            cases.append(meta | {"median_us": us})
            kernels.append(meta | {"layers": 2, "kernels": _kernels(50.0 + 4 * copy + capture)})
    (folder / "cases.json").write_text(json.dumps(cases))
    (folder / "kernels.json.gz").write_bytes(gzip.compress(json.dumps(kernels).encode()))
    return folder


def test_gains_spread_and_moving_kernel_match_hand_figures(tmp_path: Path) -> None:
    script = load_benchmark("layout_spread")
    run = _run(tmp_path / "run")
    gains = script.layout_gains(script.layout_times([run])[("deepseek_v3", 2)])
    assert gains == pytest.approx({(0, 0): 0.05, (0, 1): 0.02, (1, 0): 0.10, (1, 1): -0.02})
    name, moved, base = script.moving_kernels([run])[("deepseek_v3", 2)]
    assert name.startswith("routed grouped GEMM") and moved == pytest.approx(5.0) and base == pytest.approx(50.0)
    text = script.markdown([run], None, 0.005)
    assert "| deepseek_v3 | 2 | +5.0 +2.0 +10.0 -2.0 | 12.0 | 10.0 % / 7.4 % |" in text
    # six pairs apart by 3, 5, 7, 8, 4, 12 points: median 6.0, none within ±1.5; the signs split (+10 and -2)
    assert "(all pairs, 6): median 6.0 points, worst 12.0; within ±1.5 points: 0 of 6" in text
    assert "at 1 of 1 points: deepseek_v3 t2." in text


def test_a_run_without_layouts_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cases.json").write_text(json.dumps([{"preset": "deepseek_v3", "tokens": 1, "strategy": "sequential",
                                                      "mode": "graph", "median_us": 1.0}]))
    assert load_benchmark("layout_spread").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a layout_probe run" in err and err.count("\n") == 1
