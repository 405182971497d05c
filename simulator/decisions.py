"""Decisions, not only times: the regret of choosing multi_stream by a policy, scored on measured gains.

At each measured point (a preset or rank variant at a token count) the better of sequential and multi_stream
is known from the measurement. A policy picks one of them; its *regret* there is the measured gain of the
best choice minus that of the chosen one (in points of the sequential time: 0 when it picked the better,
else |measured gain|). Policies compared:

- ``model``: multi_stream where the predicted gain exceeds the margin (``thresholds.margin``);
- ``always``: multi_stream everywhere;
- ``vllm_default``: multi_stream up to 256 tokens (vLLM's default
  ``VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD``), sequential above;
- ``never``: sequential everywhere;
- ``measured_elsewhere`` (:func:`measured_elsewhere`, when a reference measurement is given): multi_stream
  where the same point, measured on another machine start, gained more than the margin. No predictor can be
  expected to beat it by much: it is the reproducibility floor of the measurement itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

VLLM_DEFAULT_THRESHOLD = 256


@dataclass(frozen=True)
class GainPoint:
    """One measured point: the measured and predicted multi_stream gain over sequential (fractions), and where the
    prediction is the simulator's own, its layer times' relative errors (sequential, multi_stream)."""

    preset: str
    tokens: int
    measured_gain: float
    predicted_gain: float
    time_errors: tuple[float, ...] = ()


Policy = Callable[[GainPoint, float], bool]  # (point, margin) -> choose multi_stream?

POLICIES: dict[str, Policy] = {
    "model": lambda p, margin: p.predicted_gain > margin,
    "always": lambda p, margin: True,
    "vllm_default": lambda p, margin: p.tokens <= VLLM_DEFAULT_THRESHOLD,
    "never": lambda p, margin: False,
}


def measured_elsewhere(reference: Mapping[tuple[str, int], float]) -> Policy:
    """The policy of one who measured every point on another machine start: multi_stream where that
    measurement's gain (a fraction, keyed by (preset, tokens)) exceeds the margin."""
    return lambda p, margin: reference[(p.preset, p.tokens)] > margin


def regret(point: GainPoint, multi_stream: bool) -> float:
    """Measured gain of the best choice minus that of the chosen one (≥ 0, a fraction)."""
    best = max(point.measured_gain, 0.0)
    return best - (point.measured_gain if multi_stream else 0.0)


@dataclass(frozen=True)
class PolicyScore:
    policy: str
    mean: float
    worst: float
    worst_at: str
    chose_multi_stream: int
    n: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "mean_regret": round(self.mean, 6), "worst_regret": round(self.worst, 6),
                "worst_at": self.worst_at, "chose_multi_stream": self.chose_multi_stream, "points": self.n}


def score(points: Sequence[GainPoint], margin: float, policies: dict[str, Policy] = POLICIES) -> list[PolicyScore]:
    """Mean and worst regret of each policy over ``points``."""
    if not points:
        raise ValueError("no measured points to score")
    out = []
    for name, choose in policies.items():
        picks = [choose(p, margin) for p in points]
        regrets = [regret(p, pick) for p, pick in zip(points, picks, strict=True)]
        worst = max(range(len(points)), key=lambda i: regrets[i])
        at = f"{points[worst].preset} t{points[worst].tokens}"
        out.append(PolicyScore(name, sum(regrets) / len(regrets), regrets[worst], at, sum(picks), len(points)))
    return out


def verdict(scores: Sequence[PolicyScore], label: str = "model") -> list[str]:
    """One line per trivial policy: does the model (called ``label``) beat it on mean and on worst regret, and by
    how much."""
    by = {s.policy: s for s in scores}
    model = by["model"]
    lines = []
    for name in ("always", "vllm_default", "never", "measured_elsewhere"):
        other = by.get(name)
        if other is None:
            continue
        mean_ok, worst_ok = model.mean < other.mean, model.worst < other.worst
        word = "beats" if mean_ok and worst_ok else ("ties" if model.mean == other.mean and
                                                      model.worst == other.worst else "does NOT beat")
        lines.append(f"{label} {word} {name}: mean regret {100 * model.mean:.2f} vs {100 * other.mean:.2f} points, "
                     f"worst {100 * model.worst:.2f} vs {100 * other.worst:.2f}")
    return lines


def scores_table(scores: Sequence[PolicyScore], label: str = "model") -> list[str]:
    """The policies' regrets as markdown table lines, the model's row called ``label``."""
    return ["| policy | mean regret (points) | worst (points) | worst at | chose multi_stream |",
            "| --- | --- | --- | --- | --- |",
            *(f"| {label if s.policy == 'model' else s.policy} | {100 * s.mean:.2f} | {100 * s.worst:.2f} | "
              f"{s.worst_at} | {s.chose_multi_stream}/{s.n} |" for s in scores)]
