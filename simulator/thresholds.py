"""Threshold selection: over the scenario's batch grid, where does multi_stream pay, and what to set.

For every grid point (``thresholds.concurrency``, knobs off, DBO off) the decode step is evaluated under
each strategy. multi_stream *wins* at a point when its step is faster than the best alternative
(sequential, and fused_shared where the scenario compares it and it applies) by at least
``thresholds.margin`` (a fraction of the alternative's step). The recommended token threshold
(``VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD``: multi-stream runs while a rank's batch is at most this many
tokens) is the largest batch at which it wins; none ⇒ disable the stream. ``dp_gate`` compares the
scenario's layout with its counterpart on the same GPUs (DP attention + EP vs TP + EP): gate on DP when
multi_stream wins only in the DP layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.errors import InputError
from simulator.evaluate import Evaluation, evaluate
from simulator.scenario import Scenario, parse_scenario


@dataclass(frozen=True)
class Point:
    concurrency: int
    tokens: int
    step_us: dict[str, float]
    gain_vs_sequential: float
    gain_vs_best: float
    best_alternative: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "tokens_per_rank": self.tokens,
                "step_us": {k: round(v, 3) for k, v in self.step_us.items()},
                "gain_vs_sequential": round(self.gain_vs_sequential, 6),
                "gain_vs_best_alternative": round(self.gain_vs_best, 6), "best_alternative": self.best_alternative}


@dataclass(frozen=True)
class Curve:
    """The predicted gain curve of one layout and what it recommends."""

    layout: str
    dp: int
    points: list[Point]
    margin: float

    def threshold(self, against_best: bool = True) -> int | None:
        """Largest batch (tokens per rank) where multi_stream wins by the margin; None if nowhere."""
        wins = [p.tokens for p in self.points
                if (p.gain_vs_best if against_best else p.gain_vs_sequential) >= self.margin]
        return max(wins) if wins else None

    def losses_below(self, threshold: int | None) -> list[int]:
        """Batches under the threshold where multi_stream does not win (the threshold still enables it)."""
        if threshold is None:
            return []
        return [p.tokens for p in self.points if p.tokens <= threshold and p.gain_vs_best < self.margin]

    def fused_wins(self) -> int:
        return sum(p.best_alternative == "fused_shared" and p.gain_vs_best < 0 for p in self.points)

    def to_json_dict(self) -> dict[str, Any]:
        threshold = self.threshold()
        return {"layout": self.layout, "token_threshold": threshold,
                "token_threshold_vs_sequential": self.threshold(against_best=False),
                "losses_below_threshold": self.losses_below(threshold),
                "points": [p.to_json_dict() for p in self.points]}


def _layout(s: Scenario) -> str:
    p = s.parallelism
    return f"TP{p.tp} DP{p.dp} EP{p.ep}"


def gain_curve(scenario: Scenario, source: str) -> Curve:
    """multi_stream against its alternatives over ``thresholds.concurrency``."""
    reason = scenario.model.moe_dims().applicable("multi_stream")
    if reason:
        raise InputError(f"{source}: {reason}")
    base = scenario.model_dump(mode="json", exclude_none=True)
    base["strategies"] = {"compare": sorted(set(scenario.strategies.compare) | {"sequential", "multi_stream"}),
                          "dbo": [False]}
    points = []
    for concurrency in scenario.thresholds.concurrency:
        doc = {**base, "load": {**base["load"], "concurrency": concurrency}}
        ev = evaluate(parse_scenario(doc, f"{source} (load.concurrency={concurrency})"), source)
        points.append(_point(ev, concurrency))
    return Curve(_layout(scenario), scenario.parallelism.dp, points, scenario.thresholds.margin)


def _point(ev: Evaluation, concurrency: int) -> Point:
    steps = {r.strategy: r.step_us for r in ev.results if r.step_us is not None}
    alternatives = {k: v for k, v in steps.items() if k != "multi_stream"}
    best = min(alternatives, key=lambda k: (alternatives[k], k))
    ms = steps["multi_stream"]
    return Point(concurrency, ev.case.tokens, steps, (steps["sequential"] - ms) / steps["sequential"],
                 (alternatives[best] - ms) / alternatives[best], best)


def counterpart(scenario: Scenario) -> Scenario | None:
    """The same GPUs in the other layout (DP attention + EP ↔ TP + EP), the same total load; None if the
    scenario runs on one GPU or the counterpart does not fit the model."""
    p = scenario.parallelism
    world = p.tp * p.dp
    if world == 1:
        return None
    dp = 1 if p.dp > 1 else world
    doc = scenario.model_dump(mode="json", exclude_none=True)
    total = scenario.load.concurrency * (p.dp if scenario.load.concurrency_scope == "per_dp_rank" else 1)
    doc["parallelism"] = {"tp": world // dp, "dp": dp, "ep": world}
    doc["load"] = {**doc["load"], "concurrency": total, "concurrency_scope": "total"}
    doc["thresholds"] = {**doc["thresholds"],
                         "concurrency": [c * (p.dp if scenario.load.concurrency_scope == "per_dp_rank" else 1)
                                         for c in scenario.thresholds.concurrency]}
    try:
        return parse_scenario(doc)
    except InputError:
        return None


@dataclass(frozen=True)
class Recommendation:
    scenario: str
    profile: str
    margin: float
    curve: Curve
    other: Curve | None
    link: str = ""  # the collectives' link figures and their source
    decisions: dict[str, Any] | None = None  # the profile's decisions scored on measured runs (None: not scored)
    whatif_decisions: dict[str, Any] | None = None  # the trace what-if's, scored on the decode sets (None: not)

    @property
    def threshold(self) -> int | None:
        return self.curve.threshold()

    @property
    def dp_gate(self) -> bool | None:
        """True: multi_stream wins in the DP layout but not in the TP one; None when not comparable."""
        if self.other is None:
            return None
        dp_curve, tp_curve = (self.curve, self.other) if self.curve.dp > 1 else (self.other, self.curve)
        return dp_curve.threshold() is not None and tp_curve.threshold() is None

    def settings(self) -> list[str]:
        out = []
        if self.threshold is None:
            out.append("VLLM_DISABLE_SHARED_EXPERTS_STREAM=1")
        else:
            out.append(f"VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD={self.threshold}")
        if self.dp_gate is not None:
            out.append(f"dp_gate={'true' if self.dp_gate else 'false'}")
        return out

    def to_json_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "profile": self.profile, "link": self.link, "margin": self.margin,
                "enable_multi_stream": self.threshold is not None, "token_threshold": self.threshold,
                "dp_gate": self.dp_gate, "settings": self.settings(), "curve": self.curve.to_json_dict(),
                "counterpart": self.other.to_json_dict() if self.other else None, "decisions": self.decisions,
                "whatif_decisions": self.whatif_decisions}

    def decision_lines(self) -> list[str]:
        """Where the profile's choices were scored on measured gains: which trivial policy they beat."""
        if not self.decisions:
            return ["the model's choices were not scored on measured gains for this profile (no measured runs)",
                    *self.whatif_lines()]
        d = self.decisions
        head = (f"the model's choices (multi_stream where it predicts more than {d['margin']:.1%}) scored on "
                f"{d['points']} measured graph points ({', '.join(d['runs'])}; regret = measured gain of the better "
                "strategy minus that of the chosen one):")
        return [head, *d["verdict"], *self.whatif_lines()]

    def whatif_lines(self) -> list[str]:
        """Where the trace what-if's choices were scored the same way: the alternative to this shape-only model
        when a sequential trace of the model on this GPU can be recorded."""
        w = self.whatif_decisions
        if not w:
            return []
        sets = ", ".join(s["traces"] for s in w["sets"])
        head = ("the trace what-if (moesim whatif trace SEQUENTIAL_TRACE --aux-module/--aux-region <the shared "
                "experts> --launch graph, on a sequential trace of the model on this GPU), its choices scored the "
                f"same way on {w['points']} measured graph points ({sets}: kernels_real's traces, shared experts "
                f"in --aux-region {w['region']}; measured gain: the mean over four memory layouts; per set, and the "
                "sets measured after the model's design pooled apart: calibration/VALIDATION.md, block "
                "decode-heldout-pooled):")
        return [head, *w["verdict"]]


def recommend(scenario: Scenario, source: str = "<scenario>") -> Recommendation:
    curve = gain_curve(scenario, source)
    other_scenario = counterpart(scenario)
    other = gain_curve(other_scenario, f"{source} (counterpart)") if other_scenario else None
    ev = evaluate(scenario, source)
    return Recommendation(scenario.label(source), ev.profile.describe(), scenario.thresholds.margin, curve, other,
                          ev.case.platform.describe_link(), ev.profile.fit.get("decisions"),
                          ev.profile.fit.get("whatif_decisions"))
