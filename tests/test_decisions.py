"""Regret of multi_stream policies, against hand-computed values."""

from __future__ import annotations

import pytest

from simulator.decisions import GainPoint, regret, score, verdict

POINTS = [
    GainPoint("a", 1, measured_gain=0.10, predicted_gain=0.08),  # the model picks ms: 0; never: 10
    GainPoint("a", 512, measured_gain=-0.03, predicted_gain=0.01),  # model ms: 3; always: 3; vllm (>256): 0
    GainPoint("b", 2, measured_gain=-0.01, predicted_gain=-0.02),  # model seq: 0; always and vllm: 1
]


def test_regret_is_the_gain_left_on_the_table():
    assert regret(POINTS[0], multi_stream=True) == 0.0
    assert regret(POINTS[0], multi_stream=False) == pytest.approx(0.10)
    assert regret(POINTS[1], multi_stream=True) == pytest.approx(0.03)
    assert regret(POINTS[1], multi_stream=False) == 0.0


def test_policies_scored_mean_and_worst():
    by = {s.policy: s for s in score(POINTS, margin=0.005)}
    assert by["model"].mean == pytest.approx(0.01) and by["model"].worst == pytest.approx(0.03)
    assert by["model"].worst_at == "a t512" and by["model"].chose_multi_stream == 2
    assert by["always"].mean == pytest.approx(0.04 / 3) and by["always"].worst == pytest.approx(0.03)
    assert by["vllm_default"].mean == pytest.approx(0.01 / 3) and by["vllm_default"].worst == pytest.approx(0.01)
    assert by["never"].mean == pytest.approx(0.10 / 3) and by["never"].worst == pytest.approx(0.10)


def test_the_margin_moves_the_model_s_choice():
    by = {s.policy: s for s in score(POINTS, margin=0.02)}  # now a t512 (predicted 1 %) is sequential
    assert by["model"].mean == 0.0 and by["model"].chose_multi_stream == 1


def test_verdict_says_which_policy_the_model_beats():
    lines = verdict(score(POINTS, margin=0.005))
    assert lines[0].startswith("model does NOT beat always")  # mean better, worst tied
    assert lines[1].startswith("model does NOT beat vllm_default")
    assert lines[2].startswith("model beats never")


def test_no_points_is_an_error():
    with pytest.raises(ValueError):
        score([], 0.005)


def test_thresholds_say_how_far_the_choice_was_scored():
    from simulator.thresholds import Curve, Recommendation

    curve = Curve("TP1 DP1 EP1", 1, [], 0.005)
    unscored = Recommendation("s", "p", 0.005, curve, None)
    assert "not scored" in unscored.decision_lines()[0]
    scored = Recommendation("s", "p", 0.005, curve, None, decisions={
        "points": 3, "runs": ["r"], "margin": 0.005, "verdict": verdict(score(POINTS, 0.005))})
    lines = scored.decision_lines()
    assert "3 measured graph points" in lines[0] and lines[-1].startswith("model beats never")


def test_thresholds_point_at_the_trace_what_if_where_it_was_scored():
    """With the trace what-if's record in the profile, its verdict follows the model's, with the command to run
    it; without one nothing is added."""
    from simulator.thresholds import Curve, Recommendation

    curve = Curve("TP1 DP1 EP1", 1, [], 0.005)
    model = {"points": 3, "runs": ["r"], "margin": 0.005, "verdict": verdict(score(POINTS, 0.005))}
    whatif = {"points": 3, "sets": [{"traces": "eager_traces_x", "reference": "layout_means_x", "points": 3}],
              "margin": 0.005, "region": "moe.shared_experts",
              "verdict": verdict(score(POINTS, 0.005), "the trace what-if")}
    lines = Recommendation("s", "p", 0.005, curve, None, decisions=model, whatif_decisions=whatif).decision_lines()
    head = next(i for i, line in enumerate(lines) if line.startswith("the trace what-if (moesim whatif trace"))
    assert head == 1 + len(model["verdict"])
    assert "--launch graph" in lines[head] and "--aux-region moe.shared_experts" in lines[head]
    assert "eager_traces_x" in lines[head]
    assert lines[head + 1:] == whatif["verdict"]
    assert len(Recommendation("s", "p", 0.005, curve, None, decisions=model).decision_lines()) == \
        1 + len(model["verdict"])


def test_measured_elsewhere_chooses_by_the_other_measurement():
    """The reference says a t1 lost (−2 %) and b t2 gained (+3 %): the policy picks sequential at a t1 (regret
    10 points there), multi_stream at b t2 (regret 1) and at a t512 (+1 %: regret 3)."""
    from simulator.decisions import POLICIES, measured_elsewhere

    reference = {("a", 1): -0.02, ("a", 512): 0.01, ("b", 2): 0.03}
    by = {s.policy: s for s in score(POINTS, 0.005, {**POLICIES, "measured_elsewhere": measured_elsewhere(reference)})}
    elsewhere = by["measured_elsewhere"]
    assert elsewhere.mean == pytest.approx(0.14 / 3) and elsewhere.worst == pytest.approx(0.10)
    assert elsewhere.worst_at == "a t1" and elsewhere.chose_multi_stream == 2
    assert verdict(list(by.values()))[-1].startswith("model beats measured_elsewhere")
