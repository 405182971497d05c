"""The decode co-run microbenchmark's trace bookkeeping (CPU: no graphs are captured here)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from calibration.microbench.graph_corun import kernels_by_graph, weight_sets
from kernels_real.config import get_preset


def _kernel(name: str, ts: float, dur: float, corr: int, grid: list[int]) -> dict:
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": 7, "grid": grid, "block": [128, 1, 1],
                     "registers per thread": 32, "shared memory": 0}}


def test_kernels_are_grouped_by_the_graph_range_of_their_launch() -> None:
    events = [
        {"cat": "user_annotation", "name": "graph:S", "ts": 100.0, "dur": 10.0},
        {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 101.0, "dur": 2.0, "args": {"correlation": 5}},
        {"cat": "user_annotation", "name": "graph:RG", "ts": 200.0, "dur": 10.0},
        {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 201.0, "dur": 2.0, "args": {"correlation": 9}},
        _kernel("gemv", 150.0, 4.0, 5, [132, 1, 1]),
        _kernel("silu", 155.0, 1.0, 5, [8, 1, 1]),
        _kernel("topk", 230.0, 3.0, 9, [1, 1, 1]),
        _kernel("gemv", 240.0, 4.0, 77, [132, 1, 1]),  # no launch correlates: assigned by time (after RG began)
    ]
    out = kernels_by_graph(events)
    assert out["names"] == ["gemv", "silu", "topk"]
    assert [row[:4] for row in out["graphs"]["S"]] == [[0, 7, 0.0, 4.0], [1, 7, 5.0, 1.0]]
    assert [row[:4] for row in out["graphs"]["RG"]] == [[2, 7, 0.0, 3.0], [0, 7, 10.0, 4.0]]
    assert out["graphs"]["S"][0][4] == [132, 1, 1]  # grid kept
    assert out["graphs"]["S"][0][6] == 32  # registers per thread kept


def test_weight_sets_rotate_several_l2s_of_shared_weights_within_memory() -> None:
    l2 = 60 << 20
    small = get_preset("deepseek_v3@tp8")  # 11 MB of shared weights a set
    big = get_preset("deepseek_v3")  # 22.5 GB a set: memory bounds it
    assert weight_sets(small, l2) * 3 * 7168 * 256 * 2 >= 4 * l2 or weight_sets(small, l2) == 16
    assert 1 <= weight_sets(big, l2) <= 2


def test_the_pieces_run_the_layer_s_kernels_on_cpu() -> None:
    """S, R, G and RG of a tiny config on CPU (no graphs): each piece runs, on every weight set."""
    import torch

    from calibration.microbench.graph_corun import Pieces
    from kernels_real.layer import MoEWeights

    cfg = get_preset("qwen2_57b_a14b@tp2").scaled_down()
    weights = [MoEWeights.random(cfg, "cpu", seed=k) for k in range(2)]
    pieces = Pieces(cfg, weights, 3, torch.device("cpu"))
    for k in range(2):
        pieces.shared(k)
        pieces.routing(k)
        pieces.experts(k)
        pieces.routing_and_experts(k)
    assert len(pieces.routed) == 2 and pieces.routed[0][0].shape == (3 * cfg.top_k, cfg.hidden)
