"""``benchmarks/fork_order.py``: which branch of a multi_stream layer starts first, by the layer's place in the
replay, on a hand-made run (two replays of two layers; the first replay dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

NAMES = ("nvjet_gate_up", "nvjet_down", "cast", "router", "cutlass GroupProblemShape", "add")


def _layer(t0: float, starts: dict[str, float], durs: dict[str, float], aux: bool) -> list[dict]:
    """One layer's kernels at ``t0``; the shared experts (gate_up, down) on stream 9 when ``aux``."""
    grids = {"nvjet_gate_up": [132, 1, 1], "cast": [28, 1, 1]}
    return [{"name": name, "start_us": t0 + starts[name], "dur_us": durs.get(name, 1.0),
             "stream": 9 if aux and name.startswith("nvjet") else 7, "grid": grids.get(name, [1, 1, 1])}
            for name in NAMES]


def _run(tmp_path: Path) -> Path:
    seq_starts = {"nvjet_gate_up": 0.0, "nvjet_down": 2.0, "cast": 4.0, "router": 7.0,
                  "cutlass GroupProblemShape": 9.0, "add": 12.0}
    # place 0 of each replay: the shared GEMM 0.2 µs ahead of the cast, which runs 3 times its 2 µs alone;
    # place 1: the cast 1.2 µs ahead, at its time alone
    place0 = {"nvjet_gate_up": 0.0, "nvjet_down": 2.0, "cast": 0.2, "router": 6.5,
              "cutlass GroupProblemShape": 9.0, "add": 12.0}
    place1 = {"cast": 0.0, "nvjet_gate_up": 1.2, "nvjet_down": 3.0, "router": 2.5,
              "cutlass GroupProblemShape": 9.0, "add": 12.0}
    odd = {**place1, "nvjet_gate_up": 5.0}  # the first replay's first layer: dropped
    sequential = [k for i in range(4) for k in _layer(20.0 * i, seq_starts, {"cast": 2.0}, aux=False)]
    multi = (_layer(0.0, place0, {"cast": 6.0}, True) + _layer(20.0, odd, {"cast": 2.0}, True)
             + _layer(40.0, place0, {"cast": 6.0}, True) + _layer(60.0, place1, {"cast": 2.0}, True))
    records = [{"preset": "p", "tokens": 2, "strategy": strategy, "mode": "graph", "trace": "t.json.gz",
                "layers": 4, "kernels": kernels} for strategy, kernels in (("sequential", sequential),
                                                                              ("multi_stream", multi))]
    (tmp_path / "kernels.json").write_text(json.dumps(records))
    (tmp_path / "cases.json").write_text(json.dumps([{"preset": "p", "tokens": 2, "strategy": strategy,
                                                      "mode": "graph", "layers_per_replay": 2, "median_us": 80.0}
                                                     for strategy in ("sequential", "multi_stream")]))
    return tmp_path


def test_fork_offsets_by_place_in_the_replay(tmp_path: Path) -> None:
    script = load_benchmark("fork_order")
    layers = script.forked_layers(_run(tmp_path))
    assert [(layer.place, layer.per_replay) for layer in layers] == [(0, 2), (1, 2)]
    assert layers[0].fork_us == pytest.approx(-0.2) and layers[0].head_ratio == pytest.approx(3.0)
    assert layers[1].fork_us == pytest.approx(1.2) and layers[1].head_ratio == pytest.approx(1.0)
    script.HEAD_TOKENS = (2,)
    table = script.markdown([tmp_path])
    assert "| 1 of 2 | 1 | -0.20 (-0.20 / -0.20) | 100 % | 3.00× |" in table
    assert "| 2 of 2 | 1 | +1.20 (+1.20 / +1.20) | 0 % | 1.00× |" in table
    # the head beside the GEMM where the GEMM started first (the place-0 layer only): 2 µs alone, 6 beside
    assert "| p | 2 | 132 | 1.0 | 28 | 2.00 | 6.00 |" in table


def test_a_run_without_both_strategies_is_refused(tmp_path: Path) -> None:
    script = load_benchmark("fork_order")
    (tmp_path / "kernels.json").write_text(json.dumps([]))
    with pytest.raises(Exception, match="no preset with sequential and multi_stream"):
        script.forked_layers(tmp_path)
