"""Leave-one-preset-out's graph signs counted only where another machine start agrees (hand-made gains)."""

from __future__ import annotations

from tests.helpers_benchmarks import load_benchmark


def _gain(preset: str, tokens: int, measured: float, predicted: float, mode: str = "graph") -> dict:
    return {"preset": preset, "tokens": tokens, "mode": mode, "measured_gain": measured, "predicted_gain": predicted,
            "agree": (measured > 0) == (predicted > 0)}


def test_only_signs_another_start_repeats_are_counted() -> None:
    """Threshold 1 %: a (+3 %, other start +2 %) counted, right; b (-2 %, other start -1.5 %) counted, wrong;
    c (-2 %, other start +2 %: flipped) and d (+2 %, other start +0.5 %: inside the threshold) and e (no other
    measurement) not counted; f is below the threshold here; g is eager."""
    gains = [_gain("a", 1, 0.03, 0.01), _gain("b", 2, -0.02, 0.01), _gain("c", 4, -0.02, 0.02),
             _gain("d", 8, 0.02, 0.01), _gain("e", 16, 0.02, -0.01), _gain("f", 32, 0.005, -0.01),
             _gain("g", 1, 0.08, -0.01, mode="eager")]
    reference = {("a", 1): 0.02, ("b", 2): -0.015, ("c", 4): 0.02, ("d", 8): 0.005, ("f", 32): 0.02, ("g", 1): 0.08}
    assert load_benchmark("leave_one_preset_out").reproducible_signs(gains, reference) == {"counted": 2, "right": 1}
