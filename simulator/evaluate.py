"""Run one scenario: per strategy the MoE-layer time, the decode-step time (TPOT) and the gain.

Step time = graph launch (the profile's ``replay_us``) + head (final norm, lm_head)
+ layers × attention block + dense layers × dense MLP + MoE layers × MoE block
(+ once, for a strategy whose MoE block forks across streams, the replay's first fork: the profile's
``graph_first_fork_us``), with each block simulated once by the engine (see
``simulator.workloads.decode_step``). Block simulations are memoised on a hashable key (dims, tokens, strategy,
micro-batches, parallelism, platform), per process: sweeps reuse them and parallel workers compute the same numbers
as a serial run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from simulator.engine import simulate
from simulator.errors import InputError
from simulator.ir import Program
from simulator.perfetto import to_chrome_trace
from simulator.placement import sharing_for
from simulator.profile import Profile, load_profile
from simulator.result import SimResult
from simulator.scenario import Scenario
from simulator.workloads.attention import AttentionDims
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.collectives import LinkFigures
from simulator.workloads.decode_step import (
    emit_attention_block,
    emit_dense_mlp,
    emit_head,
    emit_moe_block,
    graph_program,
)
from simulator.workloads.layout import Parallelism
from simulator.workloads.presets import MoEDims

BASELINE = "sequential"


@dataclass(frozen=True)
class Platform:
    """A profile reference plus link overrides: the hashable part of a memo key."""

    profile: str
    link_bandwidth_GBps: float | None = None
    link_latency_us: float | None = None

    def resolve(self) -> tuple[Profile, LinkFigures]:
        profile = _profile(self.profile)
        return profile, LinkFigures.of(profile, self.link_bandwidth_GBps, self.link_latency_us)

    def link_source(self) -> str:
        """Where the collectives' link figures come from: the scenario, a fit to collective measurements
        (``calibration.fit_comm`` writes ``fit.link``) or, otherwise, datasheet figures."""
        overridden = [name for name, v in (("bandwidth", self.link_bandwidth_GBps),
                                           ("latency", self.link_latency_us)) if v is not None]
        profile = _profile(self.profile)
        base = ("measured (the profile's fit.link)" if "link" in profile.fit
                else f"NOT measured: datasheet figures in profile {profile.name}")
        if len(overridden) == 2:
            return "set in the scenario"
        return f"{overridden[0]} set in the scenario, the rest {base}" if overridden else base

    def describe_link(self) -> str:
        """One line: the link figures the collectives are timed with and their source."""
        _, link = self.resolve()
        return (f"{link.bandwidth_GBps:g} GB/s per direction, {link.latency_us:g} µs per collective "
                f"({self.link_source()})")


@lru_cache(maxsize=32)
def _profile(name: str) -> Profile:
    return load_profile(name)


@dataclass(frozen=True)
class StepCase:
    """Everything a decode step depends on (hashable)."""

    dims: MoEDims
    attention: AttentionDims
    dense_intermediate: int
    vocab: int
    par: Parallelism
    tokens: int
    tokens_group: int
    kv_len: int
    platform: Platform


def block_time(program: Program, profile: Profile) -> tuple[float, SimResult]:
    """A replayed block's time: from the moment its nodes are issued (the end of the host's last API call
    before the first replayed kernel: the replay call, after whatever host time the capture took, e.g.
    stream switches that are not captured) to the end of its last kernel."""
    result = simulate(program, sharing_for(profile, program))
    first = min((k.start_us for k in result.kernels if k.replay is not None), default=0.0)
    issued = max((s.end_us for s in result.host_spans if s.end_us <= first), default=0.0)
    return result.makespan_us - issued, result


def moe_program(case: StepCase, strategy: str, micro_batches: int, with_attention: bool = False) -> Program:
    """One MoE block (optionally preceded by its attention block, for traces) as a replayed graph."""
    profile, link = case.platform.resolve()

    def emit(b: ProgramBuilder) -> None:
        if with_attention:
            emit_attention_block(b, case.dims, case.attention, case.par, link, case.tokens, case.kv_len)
        emit_moe_block(b, case.dims, case.par, link, case.tokens, case.tokens_group, strategy,
                       micro_batches=micro_batches)

    return graph_program(f"{case.dims.name} {strategy} ub={micro_batches}", profile, emit)


@lru_cache(maxsize=4096)
def moe_block(case: StepCase, strategy: str, micro_batches: int) -> tuple[float, bool]:
    """The MoE block's time, and whether it runs kernels on more than one stream (one program, simulated once)."""
    program = moe_program(case, strategy, micro_batches)
    forks = len({launch.stream for launch in program.kernels()}) > 1
    return block_time(program, case.platform.resolve()[0])[0], forks


def moe_block_us(case: StepCase, strategy: str, micro_batches: int) -> float:
    return moe_block(case, strategy, micro_batches)[0]


def first_fork_us(case: StepCase, strategy: str, micro_batches: int) -> float:
    """What the step's graph replay loses once at its first fork (the profile's ``graph_first_fork_us``) if this
    strategy's MoE block runs kernels on more than one stream, else 0."""
    figure = case.platform.resolve()[0].host.graph_first_fork_us
    return figure.value if figure is not None and moe_block(case, strategy, micro_batches)[1] else 0.0


@lru_cache(maxsize=1024)
def attention_block_us(case: StepCase) -> float:
    profile, link = case.platform.resolve()
    program = graph_program("attention", profile, lambda b: emit_attention_block(
        b, case.dims, case.attention, case.par, link, case.tokens, case.kv_len))
    return block_time(program, profile)[0]


@lru_cache(maxsize=1024)
def dense_block_us(case: StepCase) -> float:
    if case.dims.layers == case.dims.moe_layers or not case.dense_intermediate:
        return 0.0
    profile, link = case.platform.resolve()
    program = graph_program("dense_mlp", profile, lambda b: emit_dense_mlp(
        b, case.dims, case.dense_intermediate, case.par, link, case.tokens))
    return block_time(program, profile)[0]


@lru_cache(maxsize=1024)
def head_us(case: StepCase) -> float:
    profile, _ = case.platform.resolve()
    program = graph_program("head", profile, lambda b: emit_head(b, case.dims, case.vocab, case.par, case.tokens))
    return block_time(program, profile)[0]


def step_case(scenario: Scenario) -> StepCase:
    shape = scenario.model.step_shape()
    par = scenario.parallelism.layout()
    tokens, group = scenario.load.tokens(par.dp)
    p = scenario.platform
    return StepCase(scenario.model.moe_dims(), shape.attention, shape.dense_intermediate, shape.vocab, par, tokens,
                    group, scenario.load.kv_len(), Platform(p.profile, p.link_bandwidth_GBps, p.link_latency_us))


@dataclass(frozen=True)
class StrategyResult:
    strategy: str
    dbo: bool
    ran: str | None  # what ran after the knobs (None: not applicable)
    note: str | None
    moe_layer_us: float | None
    step_us: float | None
    gain_vs_sequential: float | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "dbo": self.dbo, "ran": self.ran, "note": self.note,
                "moe_layer_us": _r(self.moe_layer_us), "step_us": _r(self.step_us),
                "gain_vs_sequential": _r(self.gain_vs_sequential, 6)}


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


@dataclass(frozen=True)
class Evaluation:
    scenario: str
    profile: Profile
    case: StepCase
    step_parts: dict[str, float]
    results: list[StrategyResult]

    def result(self, strategy: str, dbo: bool = False) -> StrategyResult:
        return next(r for r in self.results if r.strategy == strategy and r.dbo == dbo)

    def to_json_dict(self) -> dict[str, Any]:
        c = self.case
        link = c.platform.resolve()[1]
        return {
            "scenario": self.scenario,
            "profile": {"name": self.profile.name, "provenance": self.profile.provenance,
                        "describe": self.profile.describe()},
            "link": {"bandwidth_GBps": link.bandwidth_GBps, "latency_us": link.latency_us,
                     "source": c.platform.link_source()},
            "inputs": {"model": c.dims.name, "tp": c.par.tp, "dp": c.par.dp, "ep": c.par.ep,
                       "tokens_per_rank": c.tokens, "tokens_into_moe": c.tokens_group, "kv_len": c.kv_len,
                       "layers": c.dims.layers, "moe_layers": c.dims.moe_layers},
            "step_parts_us": {k: round(v, 3) for k, v in self.step_parts.items()},
            "results": [r.to_json_dict() for r in self.results],
        }


def _ran(scenario: Scenario, case: StepCase, strategy: str) -> tuple[str | None, str | None]:
    """The strategy that actually runs once the knobs apply, and why it differs (if it does)."""
    reason = case.dims.applicable(strategy)
    if reason:
        return None, reason
    knobs = scenario.strategies
    if strategy == "multi_stream":
        if knobs.dp_gate and case.par.dp <= 1:
            return BASELINE, "dp_gate: dp = 1, multi_stream disabled"
        if knobs.token_threshold is not None and case.tokens > knobs.token_threshold:
            return BASELINE, f"{case.tokens} tokens > token_threshold {knobs.token_threshold}"
    return strategy, None


def evaluate(scenario: Scenario, source: str = "<scenario>") -> Evaluation:
    """Per requested strategy × DBO setting: MoE-block time, step time and gain vs sequential (no DBO)."""
    case = step_case(scenario)
    profile, _ = case.platform.resolve()
    attn, dense, head = attention_block_us(case), dense_block_us(case), head_us(case)
    dims = case.dims
    dense_layers = dims.layers - dims.moe_layers
    fixed = profile.host.replay_us.value + head + dims.layers * attn + dense_layers * dense
    first_fork = profile.host.graph_first_fork_us
    parts = {"graph_launch": profile.host.replay_us.value, "head": head, "attention_block": attn,
             "dense_mlp_block": dense, "first_fork": first_fork.value if first_fork is not None else 0.0}

    def step(moe_us: float, first_fork: float) -> float:
        return fixed + dims.moe_layers * moe_us + first_fork

    baseline = step(moe_block_us(case, BASELINE, 1), first_fork_us(case, BASELINE, 1))
    results = []
    for dbo in scenario.strategies.dbo:
        micro = 2 if dbo else 1
        for strategy in scenario.strategies.compare:
            ran, note = _ran(scenario, case, strategy)
            if ran is None:
                results.append(StrategyResult(strategy, dbo, None, note, None, None))
                continue
            if micro > case.tokens:
                results.append(StrategyResult(strategy, dbo, None, f"{case.tokens} token(s) cannot be split into "
                                                                   "two micro-batches", None, None))
                continue
            moe = moe_block_us(case, ran, micro)
            total = step(moe, first_fork_us(case, ran, micro))
            results.append(StrategyResult(strategy, dbo, ran, note, moe, total, (baseline - total) / baseline))
    return Evaluation(scenario.label(source), profile, case, parts, results)


def trace_document(evaluation: Evaluation) -> dict[str, Any]:
    """Perfetto JSON: one process per strategy, each one decoder layer (attention + MoE block) replayed."""
    events: list[dict[str, Any]] = []
    profile = evaluation.profile
    for pid, r in enumerate((r for r in evaluation.results if r.ran is not None), start=1):
        program = moe_program(evaluation.case, r.ran or BASELINE, 2 if r.dbo else 1, with_attention=True)
        label = f"{r.strategy}{' + dbo' if r.dbo else ''} ({profile.describe()})"
        for event in to_chrome_trace(block_time(program, profile)[1], label)["traceEvents"]:
            event = {**event, "pid": pid}
            if "id" in event:  # flow ids must stay unique across the merged processes
                event["id"] += pid * 1_000_000
            events.append(event)
    if not events:
        raise InputError("no applicable strategy to trace")
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"generator": "moesim run"}}
