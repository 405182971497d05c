"""Threshold selection: the rule on hand-made curves, and how the model moves the threshold."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.scenario import parse_scenario, with_value
from simulator.thresholds import Curve, Point, Recommendation, counterpart, gain_curve, recommend

# A heavy shared expert (Qwen2-57B: 20480 wide) under DP attention + EP: the shared path outlasts the gate,
# so on the aux stream it overlaps the dispatch (link-bound, few SMs) and the routed experts.
HEAVY = {"model": {"preset": "Qwen2-57B-A14B"}, "platform": {"profile": "h200-datasheet"},
         "parallelism": {"tp": 1, "dp": 4, "ep": 4}, "load": {"concurrency": 8},
         "strategies": {"compare": ["sequential", "multi_stream"]},
         "thresholds": {"margin": 0.10, "concurrency": [2 ** i for i in range(11)]}}


def _point(tokens: int, gain: float, best: str = "sequential") -> Point:
    return Point(tokens, tokens, {"sequential": 100.0, "multi_stream": 100.0 * (1 - gain)}, gain, gain, best)


def test_threshold_is_the_largest_winning_batch() -> None:
    curve = Curve("TP1 DP8 EP8", 8, [_point(1, 0.05), _point(2, 0.001), _point(4, 0.03), _point(8, -0.02)], 0.01)
    assert curve.threshold() == 4
    assert curve.losses_below(4) == [2]
    assert Curve("x", 1, [_point(1, 0.005)], 0.01).threshold() is None


def test_settings_and_dp_gate() -> None:
    dp = Curve("TP1 DP8 EP8", 8, [_point(1, 0.05), _point(2, 0.02)], 0.01)
    tp = Curve("TP8 DP1 EP8", 1, [_point(1, -0.01), _point(2, -0.02)], 0.01)
    rec = Recommendation("s", "p", 0.01, dp, tp)
    assert rec.dp_gate is True
    assert rec.settings() == ["VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD=2", "dp_gate=true"]
    off = Recommendation("s", "p", 0.01, tp, dp)
    assert off.settings() == ["VLLM_DISABLE_SHARED_EXPERTS_STREAM=1", "dp_gate=true"]
    assert Recommendation("s", "p", 0.01, dp, None).settings() == ["VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD=2"]


def _threshold(doc: dict) -> int | None:
    return gain_curve(parse_scenario(doc), "test").threshold()


def test_cheaper_shared_expert_lowers_the_threshold() -> None:
    """Less shared work to hide: the gain at every batch shrinks, so it falls below the margin earlier."""
    base = _threshold(HEAVY)
    cheap = _threshold(with_value(HEAVY, "model.moe.shared_intermediate", 20480 // 4))
    assert base is not None and cheap is not None
    assert cheap < base


def test_slower_link_raises_the_threshold() -> None:
    """A longer dispatch/combine leaves more of the device idle while it waits on the link; the aux-stream
    shared expert fills it, so multi_stream keeps its margin up to larger batches."""
    base = _threshold(HEAVY)
    slow = _threshold(with_value(HEAVY, "platform.link_bandwidth_GBps", 45.0))
    assert base is not None
    assert slow is not None and slow > base


def test_counterpart_keeps_the_gpus_and_the_total_load() -> None:
    other = counterpart(parse_scenario(HEAVY))
    assert other is not None
    p = other.parallelism
    assert (p.tp, p.dp, p.ep) == (4, 1, 4)
    assert other.load.concurrency == 8 * 4 and other.load.concurrency_scope == "total"
    assert counterpart(parse_scenario(with_value(HEAVY, "parallelism", {"tp": 1, "dp": 1, "ep": 1}))) is None


def test_recommend_json_shape() -> None:
    doc = with_value(HEAVY, "thresholds.concurrency", [1, 16])
    out = recommend(parse_scenario(doc), "heavy.yaml").to_json_dict()
    assert set(out) >= {"scenario", "profile", "margin", "enable_multi_stream", "token_threshold", "dp_gate",
                        "settings", "curve", "counterpart"}
    assert [p["concurrency"] for p in out["curve"]["points"]] == [1, 16]
    assert "DATASHEET" in out["profile"]


def test_model_without_shared_expert_is_refused() -> None:
    doc = with_value(with_value(HEAVY, "model.preset", "Qwen3-30B-A3B"), "parallelism", {})
    with pytest.raises(InputError, match="no shared expert"):
        gain_curve(parse_scenario(doc), "q3")
