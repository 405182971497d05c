"""One decode step on one rank: the blocks of a decoder layer under TP / DP-attention / EP, each a graph.

A decode step is ``layers`` decoder layers (attention + dense MLP or MoE), then the final norm and lm_head,
all launched as one CUDA/HIP graph (as serving engines run decode). Every block ends joined on the main
stream and the next block reads its output, so the step is composed from per-block times (see
``simulator.evaluate``); each block is simulated once, captured and replayed: its time is the replay's
makespan less the host's replay cost (i.e. its kernels plus one node gap each).

A rank's batch, and what its routed experts see under a parallel layout, are derived in
``simulator.workloads.layout``; the MoE block is ``moe_block``'s one emitter with the rank's view.

Communication: DP attention (``dp > 1``, which needs ``ep = tp·dp``) dispatches the ``t·k`` routed rows
of a rank's tokens to their experts before the routed experts and combines them after (all-to-all); TP
(``tp > 1``) all-reduces after attention and after the MoE (routed partial sums and the split shared
expert). Communication kernels run on main, or with DBO (two micro-batches) on a ``comm`` stream so one
micro-batch's compute overlaps the other's dispatch/combine.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from simulator.cost import CostModel
from simulator.errors import InputError
from simulator.ir import Program
from simulator.profile import Profile
from simulator.workloads.attention import AttentionDims, KernelIssuer, emit_attention
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.collectives import LinkFigures, all_reduce_us, comm_launch
from simulator.workloads.layout import ExpertView, Parallelism, split_tokens
from simulator.workloads.moe_block import BlockPlan, MicroBatch, emit_moe
from simulator.workloads.presets import MoEDims


def emit_moe_block(builder: ProgramBuilder, dims: MoEDims, par: Parallelism, link: LinkFigures, tokens: int,
                   tokens_group: int, strategy: str, *, micro_batches: int = 1, layer: str = "moe") -> list[str]:
    """Issue one rank's MoE block (``tokens`` tokens on this rank, ``tokens_group`` distinct tokens entering
    the MoE across ranks) from the builder's current stream; returns each micro-batch's output buffer."""
    plan = BlockPlan(strategy, layer, par, link, event_scope=f"{layer}.", interleaved=True)
    reason = plan.check(dims)
    if reason:
        raise InputError(reason)
    fused = strategy == "fused_shared"
    batches = [MicroBatch(index, count, ExpertView.of_rank(dims, par, tokens_group * count / tokens, fused))
               for index, count in enumerate(split_tokens(tokens, micro_batches))]
    return emit_moe(builder, dims, batches, plan)


def emit_attention_block(builder: ProgramBuilder, dims: MoEDims, attn: AttentionDims, par: Parallelism,
                         link: LinkFigures, tokens: int, kv_len: int, layer: str = "attn") -> str:
    """Attention, its TP all-reduce and the fused residual add + post-attention RMSNorm."""
    out = emit_attention(builder, attn, dims.hidden, dims.dtype_bytes, tokens, kv_len, par.tp, prefix=layer)
    kernels = KernelIssuer(builder, tokens, dims.dtype_bytes, layer)
    out = _all_reduce(builder, link, par.tp, tokens * dims.hidden * dims.dtype_bytes, out)
    return kernels.elementwise("add_rmsnorm", out, tokens * dims.hidden, 4 * dims.dtype_bytes, "post_norm")


def emit_dense_mlp(builder: ProgramBuilder, dims: MoEDims, intermediate: int, par: Parallelism,
                   link: LinkFigures, tokens: int, layer: str = "mlp") -> str:
    """A dense SwiGLU MLP split ``tp`` ways, with its all-reduce (DP ranks hold it whole)."""
    kernels = KernelIssuer(builder, tokens, dims.dtype_bytes, layer)
    width, hidden, elem = intermediate // par.tp, dims.hidden, dims.dtype_bytes
    gate_up = kernels.gemm("gate_up_proj", kernels.buf("x"), hidden, 2 * width, "gate_up")
    act = kernels.elementwise("silu_and_mul", gate_up, tokens * width, 3 * elem, "act")
    out = kernels.gemm("down_proj", act, width, hidden, "down")
    return _all_reduce(builder, link, par.tp, tokens * hidden * elem, out)


def emit_head(builder: ProgramBuilder, dims: MoEDims, vocab: int, par: Parallelism, tokens: int) -> str:
    """Final RMSNorm and the lm_head GEMM (vocabulary split ``tp`` ways)."""
    kernels = KernelIssuer(builder, tokens, dims.dtype_bytes, "head")
    x = kernels.elementwise("final_rmsnorm", kernels.buf("x"), tokens * dims.hidden, 2 * dims.dtype_bytes,
                            "x_norm")
    return kernels.gemm("lm_head", x, dims.hidden, math.ceil(vocab / par.tp), "logits")


def _all_reduce(builder: ProgramBuilder, link: LinkFigures, ranks: int, nbytes: float, src: str) -> str:
    dur = all_reduce_us(link, ranks, nbytes)
    if dur <= 0 or builder.cost is None:
        return src
    out = f"{src}.all_reduce"
    builder.launch(comm_launch("all_reduce", dur, nbytes, builder.cost.profile, builder.current, (src,), (out,)))
    return out


def graph_program(name: str, profile: Profile, emit: Callable[[ProgramBuilder], object]) -> Program:
    """Capture what ``emit`` issues into one graph and replay it once (profile host costs), as one block of a
    decode step's graph: its forks are not the step replay's first, so they cost no first-fork gap (the step
    pays that once: ``simulator.evaluate``)."""
    host = profile.host_costs("eager").model_copy(update={"first_fork_gap_us": 0.0})
    builder = ProgramBuilder(name=name, host=host, cost=CostModel(profile))
    with builder.capture("block"):
        emit(builder)
    builder.replay("block")
    return builder.build()
