"""One MoE layer on one GPU, as ``kernels_real.layer.MoELayer`` runs it: the one-rank case of ``moe_block``.

Strategies (vLLM's names plus FSE): ``sequential`` (everything on main, shared experts first),
``multi_stream`` (the shared experts on aux behind one event pair per micro-batch, reused by every call as
kernels_real reuses it), ``fused_shared`` (the shared MLP folded into the grouped GEMMs). Micro-batches run
one after another; the experts hit are counted directly (``ExpertView.whole_layer``). ``unsafe_inplace``
mirrors ``MoELayer.unsafe_inplace_demo`` (a race the hazard checker finds).
"""

from __future__ import annotations

from simulator.cost import CostModel
from simulator.errors import InputError
from simulator.ir import Program
from simulator.profile import Profile
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.layout import ExpertView, split_tokens
from simulator.workloads.moe_block import BlockPlan, MicroBatch, emit_moe
from simulator.workloads.presets import MoEDims

MODES: tuple[str, ...] = ("eager", "graph")


def emit_moe_layer(builder: ProgramBuilder, dims: MoEDims, tokens: int, strategy: str = "multi_stream", *,
                   micro_batches: int = 1, layer: str = "moe", unsafe_inplace: bool = False,
                   touched: float | None = None) -> list[str]:
    """Issue one MoE layer from the builder's current stream (main); returns each micro-batch's output
    buffer (inputs: ``{layer}.ub{i}.x``). ``touched``: the routed experts hit, where known (one micro-batch
    only); else their expectation."""
    plan = BlockPlan(strategy, layer, unsafe_inplace=unsafe_inplace)
    reason = plan.check(dims)
    if reason:
        raise InputError(reason)
    if tokens <= 0:
        raise InputError(f"tokens must be positive, got {tokens}")
    if touched is not None and micro_batches != 1:
        raise InputError("the experts hit can be given for one micro-batch only")
    fused = strategy == "fused_shared"
    batches = [MicroBatch(index, count, ExpertView.whole_layer(dims, count, fused, touched))
               for index, count in enumerate(split_tokens(tokens, micro_batches))]
    return emit_moe(builder, dims, batches, plan)


def moe_layer_program(dims: MoEDims, tokens: int, strategy: str, profile: Profile, *,
                      micro_batches: int = 1, mode: str = "eager", iterations: int = 1,
                      layers_per_graph: int = 1, touched: float | None = None) -> Program:
    """The layer as kernels_real's bench runs it: ``iterations`` eager calls back to back, or (``graph``)
    ``layers_per_graph`` calls captured into one graph, replayed ``iterations`` times. Host costs are the
    profile's API costs (the engine charges captured ops nothing, a replay its cost and node gaps). ``touched``:
    the routed experts each layer hits, where known (``emit_moe_layer``)."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if iterations < 1 or layers_per_graph < 1:
        raise InputError("iterations and layers_per_graph must be >= 1")
    builder = ProgramBuilder(name=f"{dims.name} T={tokens} {strategy} ub={micro_batches} {mode}",
                             host=profile.host_costs("eager"), cost=CostModel(profile))
    if mode == "graph":
        with builder.capture("moe_layer"):
            for index in range(layers_per_graph):
                emit_moe_layer(builder, dims, tokens, strategy, micro_batches=micro_batches, layer=f"moe{index}",
                               touched=touched)
        for _ in range(iterations):
            builder.replay("moe_layer")
    else:
        for index in range(iterations):
            emit_moe_layer(builder, dims, tokens, strategy, micro_batches=micro_batches, layer=f"moe{index}",
                               touched=touched)
    return builder.build()
