"""One decode step on one rank: the blocks of a decoder layer under TP / DP-attention / EP, each a graph.

A decode step is ``layers`` decoder layers (attention + dense MLP or MoE), then the final norm and lm_head,
all launched as one CUDA/HIP graph (as serving engines run decode). Every block ends joined on the main
stream and the next block reads its output, so the step is composed from per-block times (see
``simulator.evaluate``); each block is simulated once, captured and replayed: its time is the replay's
makespan less the host's replay cost (i.e. its kernels plus one node gap each).

Parallelism (``tp`` × ``dp`` GPUs; ``ep`` divides them). A DP group of ``tp`` ranks serves its own
requests, so a rank's batch is ``t`` tokens (one per running request of its group); the MoE layer is shared
by all ranks. Derivation of what a rank's routed experts see (expected values):

- ``T`` distinct tokens enter the MoE per step: ``T = t·dp`` (each DP group brings its own; the ``tp``
  ranks of a group hold the same tokens);
- a rank holds ``E/ep`` experts; each expert is split ``s = tp·dp/ep`` ways along its intermediate width
  (``s = tp`` for plain TP MoE, ``1`` for full EP);
- a token's ``k`` picks land on a rank's experts with probability ``1/ep`` each, so the rank's experts
  receive ``T·k/ep`` rows; of the experts hit at least once by ``T`` tokens (``touched_experts`` of
  ``moe_layer``: ``E·(1 − (1 − k/E)^T)`` for uniform picks, fewer under kernels_real's biased
  ``grouped_sigmoid`` router, which the H200 profile was validated with) a rank holds ``1/ep``.
  DP8 + EP8: ``T = 8t`` gives ``t·k`` rows per rank (as many as it sent out); TP8 + EP8: ``T = t`` gives
  ``t·k/8``; TP8 alone: ``t·k`` rows over all ``E`` experts of width ``I/8``;
- ``fused_shared`` adds ``c = shared / I`` always-selected pseudo-experts, replicated once per EP rank
  (SGLang's shared-experts fusion), each token's shared rows staying on its local replica: ``c`` more
  groups of ``T/ep`` rows each per rank;
- the shared expert (unfused) is split ``tp`` ways and runs on the rank's own ``t`` tokens.

Communication: DP attention (``dp > 1``, which needs ``ep = tp·dp``) dispatches the ``t·k`` routed rows
of a rank's tokens to their experts before the routed experts and combines them after (all-to-all); TP
(``tp > 1``) all-reduces after attention and after the MoE (routed partial sums and the split shared
expert). Communication kernels run on main, or with DBO (two micro-batches) on a ``comm`` stream so one
micro-batch's compute overlaps the other's dispatch/combine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from simulator.cost import CostModel
from simulator.errors import InputError
from simulator.ir import Program
from simulator.profile import Profile
from simulator.workloads.attention import AttentionDims, KernelIssuer, emit_attention
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.collectives import LinkFigures, all_reduce_us, all_to_all_us, comm_launch
from simulator.workloads.moe_layer import ExpertView, LayerEmitter, split_tokens, touched_experts
from simulator.workloads.presets import MoEDims

F32, I32, I64 = 4, 4, 8  # bytes of float32, int32, int64


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    dp: int = 1
    ep: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.dp

    @property
    def all_to_all(self) -> bool:
        """Dispatch/combine over the EP group (DP attention with expert parallelism)."""
        return self.dp > 1 and self.ep > 1

    @property
    def expert_split(self) -> int:
        return self.world // self.ep

    def check(self, dims: MoEDims) -> str | None:
        """None if this layout is supported for ``dims``, else why not."""
        if min(self.tp, self.dp, self.ep) < 1:
            return "tp, dp and ep must be >= 1"
        if self.world % self.ep:
            return f"ep {self.ep} does not divide tp × dp = {self.world}"
        if self.dp > 1 and self.ep != self.world:
            return f"DP attention needs expert parallelism over all GPUs: ep = tp × dp = {self.world}"
        if dims.n_experts % self.ep:
            return f"{dims.n_experts} experts do not split over ep {self.ep}"
        if dims.moe_intermediate % self.expert_split or dims.shared_intermediate % self.tp:
            return f"expert widths of {dims.name} do not split {self.expert_split} / {self.tp} ways"
        return None


TOUCHED_GRID_STEPS = 4  # grid points per doubling of the token count for the router's Monte-Carlo


def grid_touched_experts(dims: MoEDims, tokens: int) -> float:
    """``touched_experts``, with the Monte-Carlo of the biased ``grouped_sigmoid`` router run only at up to 16
    tokens and at the grid points ``round(2^(j/4))`` above (every power of two among them, so every measured
    token count), interpolated log-log in between. One Monte-Carlo costs up to 0.6 s, so a sweep over many
    batch sizes needs a few grid points instead of one per batch. The Monte-Carlo's own noise between
    neighbouring token counts is about ±3%; against direct calls (DeepSeek-V3 and Kimi-K2, 17 to 2000 tokens)
    the interpolation is within it (median 0.8%, max 3.5%). Closed-form (uniform) routers are exact."""
    if dims.router != "grouped_sigmoid" or tokens <= 16:
        return touched_experts(dims, tokens)
    j = math.floor(math.log2(tokens) * TOUCHED_GRID_STEPS + 1e-9)
    lo, hi = (round(2 ** (i / TOUCHED_GRID_STEPS)) for i in (j, j + 1))
    if tokens in (lo, hi):
        return touched_experts(dims, tokens)
    y_lo, y_hi = touched_experts(dims, lo), touched_experts(dims, hi)
    frac = math.log(tokens / lo) / math.log(hi / lo)
    return math.exp(math.log(y_lo) + frac * math.log(y_hi / y_lo))


def expert_view(dims: MoEDims, par: Parallelism, tokens_group: float, fused: bool) -> ExpertView:
    """A rank's rows, touched experts, local groups and expert width for ``tokens_group`` distinct tokens
    entering the MoE (``T`` in the module docstring). Experts hit: ``touched_experts`` of the MoE layer model
    (uniform picks, or kernels_real's biased ``grouped_sigmoid`` router; see ``grid_touched_experts``) over
    all ``T`` tokens, a rank holding a ``1/ep`` share of them (the router favours no rank's experts in
    expectation)."""
    routed = tokens_group * dims.top_k / par.ep
    touched = grid_touched_experts(dims, max(1, round(tokens_group))) / par.ep
    chunks = dims.fused_shared_chunks if fused else 0
    return ExpertView(routed, min(max(touched, 1.0), max(routed, 1.0)), tokens_group / par.ep if chunks else 0.0,
                      chunks, dims.n_experts // par.ep + chunks, dims.moe_intermediate // par.expert_split)


class _RankEmitter(LayerEmitter):
    """The layer's torch ops, with the routed experts sized by an ``ExpertView`` instead of the
    single-GPU view (all experts local, ``t × k`` rows); otherwise costed exactly as ``moe_layer``'s
    (measured tables, per-op families)."""

    def __init__(self, b: ProgramBuilder, dims: MoEDims, tokens: int, prefix: str, view: ExpertView) -> None:
        super().__init__(b, dims, tokens, prefix)
        self.view = view

    def expert_view(self, n_groups: int, k: int) -> ExpertView:
        return self.view


@dataclass
class _Micro:
    """Buffers and events of one micro-batch while its phases are issued."""

    index: int
    tokens: int
    emitter: _RankEmitter
    shared_emitter: LayerEmitter
    x: str
    shared: str | None = None
    routed: str | None = None
    ids: str = ""
    wts: str = ""


class _MoEBlock:
    """Issues the MoE block in three phases per micro-batch: (A) shared-expert fork or run, gate, dispatch;
    (B) routed experts, combine; (C) join, add, all-reduce. With two micro-batches the phases are issued
    A0 A1 B0 B1 C0 C1, so one micro-batch's compute can overlap the other's communication."""

    def __init__(self, b: ProgramBuilder, dims: MoEDims, par: Parallelism, link: LinkFigures, strategy: str,
                 layer: str, comm_stream: bool) -> None:
        self.b, self.d, self.par, self.link, self.strategy, self.layer = b, dims, par, link, strategy, layer
        self.main = b.current
        self.comm = b.stream("comm") if comm_stream else self.main
        self.aux = b.stream("aux") if strategy == "multi_stream" else self.main
        self.profile = b.cost.profile if b.cost else None

    def event(self, m: _Micro, name: str) -> str:
        return f"{self.layer}.ub{m.index}.{name}"

    def collective(self, m: _Micro, name: str, dur: float, nbytes: float, src: str, stream: str) -> str:
        """Launch a collective on ``stream`` (handing over from main and back through events if it is the
        comm stream); returns its output buffer."""
        out = f"{src}.{name}"
        if dur <= 0:
            return src
        assert self.profile is not None
        if stream != self.main:
            ready = self.event(m, f"{name}_in")
            self.b.record(ready, self.main)
            self.b.wait(ready, stream)
        self.b.launch(comm_launch(name, dur, nbytes, self.profile, stream, (src,), (out,)), stream)
        if stream != self.main:
            self.b.record(self.event(m, f"{name}_out"), stream)
        return out

    def join(self, m: _Micro, name: str) -> None:
        if self.comm != self.main:
            self.b.wait(self.event(m, f"{name}_out"), self.main)

    def phase_a(self, m: _Micro) -> None:
        e, d = m.emitter, self.d
        if self.strategy == "multi_stream":
            ready, done = self.event(m, "input_ready"), self.event(m, "output_ready")
            self.b.record(ready, self.main)
            with self.b.using(self.aux):
                self.b.wait(ready, self.aux)
                m.shared = m.shared_emitter.shared(m.x, self.aux)
                self.b.record(done, self.aux)
        elif self.strategy == "sequential" and d.has_shared:
            m.shared = m.shared_emitter.shared(m.x)
        m.ids, m.wts = e.gate(m.x)
        if self.strategy == "fused_shared":
            m.ids, m.wts = e.fused_weights(m.x, m.ids, m.wts)
        if self.par.all_to_all:
            nbytes = m.tokens * d.top_k * d.hidden * e.w
            m.routed = self.collective(m, "dispatch", all_to_all_us(self.link, self.par.ep, nbytes), nbytes,
                                       m.x, self.comm)
        else:
            m.routed = m.x

    def phase_b(self, m: _Micro) -> None:
        assert m.routed is not None
        if self.par.all_to_all:
            self.join(m, "dispatch")
        y = m.emitter.experts(m.routed, m.ids, m.wts, 0, 0)
        if self.par.all_to_all:
            d = self.d
            nbytes = m.tokens * d.top_k * d.hidden * m.emitter.w
            y = self.collective(m, "combine", all_to_all_us(self.link, self.par.ep, nbytes), nbytes, y,
                                self.comm)
        m.routed = y

    def phase_c(self, m: _Micro) -> str:
        assert m.routed is not None
        if self.par.all_to_all:
            self.join(m, "combine")
        out = m.routed
        if m.shared is not None:
            if self.strategy == "multi_stream":
                self.b.wait(self.event(m, "output_ready"), self.main)
            out = m.emitter.add(out, m.shared, m.emitter.buf("out"))
        nbytes = m.tokens * self.d.hidden * m.emitter.w
        return self.collective(m, "all_reduce", all_reduce_us(self.link, self.par.tp, nbytes), nbytes, out,
                               self.main)


def emit_moe_block(b: ProgramBuilder, dims: MoEDims, par: Parallelism, link: LinkFigures, tokens: int,
                   tokens_group: int, strategy: str, *, micro_batches: int = 1, layer: str = "moe") -> list[str]:
    """Issue one rank's MoE block (``tokens`` tokens on this rank, ``tokens_group`` distinct tokens entering
    the MoE across ranks) from the builder's current stream; returns each micro-batch's output buffer."""
    reason = dims.applicable(strategy) or par.check(dims)
    if reason:
        raise InputError(reason)
    counts = split_tokens(tokens, micro_batches)
    block = _MoEBlock(b, dims, par, link, strategy, layer, comm_stream=micro_batches > 1 and par.all_to_all)
    shared_dims = replace(dims, shared_intermediate=dims.shared_intermediate // par.tp)
    micros = []
    for ub, t in enumerate(counts):
        prefix = f"{layer}.ub{ub}"
        view = expert_view(dims, par, tokens_group * t / tokens, strategy == "fused_shared")
        emitter = _RankEmitter(b, dims, t, prefix, view)
        micros.append(_Micro(ub, t, emitter, LayerEmitter(b, shared_dims, t, prefix), emitter.buf("x")))
    for m in micros:
        block.phase_a(m)
    for m in micros:
        block.phase_b(m)
    return [block.phase_c(m) for m in micros]


def emit_attention_block(b: ProgramBuilder, dims: MoEDims, attn: AttentionDims, par: Parallelism,
                         link: LinkFigures, tokens: int, kv_len: int, layer: str = "attn") -> str:
    """Attention, its TP all-reduce and the fused residual add + post-attention RMSNorm."""
    o = emit_attention(b, attn, dims.hidden, dims.dtype_bytes, tokens, kv_len, par.tp, prefix=layer)
    k = KernelIssuer(b, tokens, dims.dtype_bytes, layer)
    o = _all_reduce(b, link, par.tp, tokens * dims.hidden * dims.dtype_bytes, o)
    return k.elementwise("add_rmsnorm", o, tokens * dims.hidden, 4 * dims.dtype_bytes, "post_norm")


def emit_dense_mlp(b: ProgramBuilder, dims: MoEDims, intermediate: int, par: Parallelism, link: LinkFigures,
                   tokens: int, layer: str = "mlp") -> str:
    """A dense SwiGLU MLP split ``tp`` ways, with its all-reduce (DP ranks hold it whole)."""
    k = KernelIssuer(b, tokens, dims.dtype_bytes, layer)
    width, h, w = intermediate // par.tp, dims.hidden, dims.dtype_bytes
    gu = k.gemm("gate_up_proj", k.buf("x"), h, 2 * width, "gate_up")
    act = k.elementwise("silu_and_mul", gu, tokens * width, 3 * w, "act")
    y = k.gemm("down_proj", act, width, h, "down")
    return _all_reduce(b, link, par.tp, tokens * h * w, y)


def emit_head(b: ProgramBuilder, dims: MoEDims, vocab: int, par: Parallelism, tokens: int) -> str:
    """Final RMSNorm and the lm_head GEMM (vocabulary split ``tp`` ways)."""
    k = KernelIssuer(b, tokens, dims.dtype_bytes, "head")
    x = k.elementwise("final_rmsnorm", k.buf("x"), tokens * dims.hidden, 2 * dims.dtype_bytes, "x_norm")
    return k.gemm("lm_head", x, dims.hidden, math.ceil(vocab / par.tp), "logits")


def _all_reduce(b: ProgramBuilder, link: LinkFigures, ranks: int, nbytes: float, src: str) -> str:
    dur = all_reduce_us(link, ranks, nbytes)
    if dur <= 0 or b.cost is None:
        return src
    out = f"{src}.all_reduce"
    b.launch(comm_launch("all_reduce", dur, nbytes, b.cost.profile, b.current, (src,), (out,)))
    return out


def graph_program(name: str, profile: Profile, emit: Callable[[ProgramBuilder], object]) -> Program:
    """Capture what ``emit`` issues into one graph and replay it once (profile host costs)."""
    b = ProgramBuilder(name=name, host=profile.host_costs("eager"), cost=CostModel(profile))
    with b.capture("block"):
        emit(b)
    b.replay("block")
    return b.build()
