"""What to do with a recommendation, in words: ``dp_gate`` is moesim's finding, not a vLLM setting."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.thresholds import Recommendation


def dp_gate_note(rec: Recommendation) -> str | None:
    """How to act on ``dp_gate`` (None when the scenario has no counterpart layout to compare with)."""
    if rec.other is None or rec.dp_gate is None:
        return None
    dp_curve, tp_curve = (rec.curve, rec.other) if rec.curve.dp > 1 else (rec.other, rec.curve)
    dp_wins, tp_wins = dp_curve.threshold() is not None, tp_curve.threshold() is not None
    head = "dp_gate is not a vLLM setting: "
    if dp_wins and not tp_wins:
        return (head + f"multi_stream pays with DP attention ({dp_curve.layout}) but not with TP attention "
                f"({tp_curve.layout}) on these GPUs, so enable the shared-experts stream only where dp > 1 and set "
                "VLLM_DISABLE_SHARED_EXPERTS_STREAM=1 on TP deployments (the ROCm heuristic, strategies.dp_gate in a "
                "scenario)")
    if dp_wins and tp_wins:
        return (head + f"multi_stream pays in both layouts ({dp_curve.layout} and {tp_curve.layout}), so do not "
                "make the stream depend on dp > 1 (a dp > 1 gate, the ROCm heuristic, leaves the TP gain unused)")
    if tp_wins:
        return (head + f"multi_stream pays only with TP attention ({tp_curve.layout}); a dp > 1 gate, the ROCm "
                "heuristic, would turn it off where it pays")
    return head + "multi_stream pays in neither layout, so gating it on dp > 1 changes nothing"
