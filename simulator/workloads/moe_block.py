"""One MoE block on one rank, under any parallelism: the one fork/join emitter.

Per micro-batch three phases: (A) the shared experts (on aux behind an event pair under ``multi_stream``,
on main first under ``sequential``), the gate (and the fused shared weights under ``fused_shared``), the
all-to-all dispatch; (B) the routed experts, the combine; (C) the join, the add, the TP all-reduce.
``multi_stream`` is vLLM's: main records input-ready, the host switches to aux, aux waits, runs the shared
experts (reading the routed input buffer itself: the seed-000 alias) and records output-ready, the host
switches back; main runs the gate and the routed experts, waits on output-ready and adds.

The single-GPU layer (``moe_layer``) is the one-rank case: no collectives, micro-batches one after
another, one event pair per micro-batch as kernels_real's layer reuses it. A decode-step rank
(``decode_step``) interleaves its micro-batches' phases A0 A1 B0 B1 C0 C1, so one micro-batch's compute can
overlap the other's communication (run on a ``comm`` stream with DBO's two micro-batches), and names its
events per layer. Collectives run as ``collectives.comm_launch`` kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.errors import InputError
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.collectives import LinkFigures, all_reduce_us, all_to_all_us, comm_launch
from simulator.workloads.layout import ONE_GPU, ExpertView, Parallelism
from simulator.workloads.presets import MoEDims
from simulator.workloads.torch_ops import LayerEmitter


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch: its index, its tokens on this rank, and what its routed experts see."""

    index: int
    tokens: int
    view: ExpertView


@dataclass(frozen=True)
class BlockPlan:
    """How a rank issues its MoE block. ``event_scope`` prefixes the fork/join event names (``""``: the
    layer's own event pair per micro-batch, reused by every call); ``interleaved``: phases A0 A1 B0 B1 C0 C1
    rather than one micro-batch after another; ``unsafe_inplace`` (``multi_stream`` only) mirrors
    ``MoELayer.unsafe_inplace_demo``: main scales the input in place right after the fork, racing with aux's
    reads. ``link`` times the collectives (needed when the layout has any)."""

    strategy: str
    layer: str = "moe"
    par: Parallelism = ONE_GPU
    link: LinkFigures | None = None
    event_scope: str = ""
    interleaved: bool = False
    unsafe_inplace: bool = False

    def check(self, dims: MoEDims) -> str | None:
        """None if this plan can issue ``dims``' block, else why not."""
        reason = dims.applicable(self.strategy) or self.par.check(dims)
        if reason is None and self.unsafe_inplace and self.strategy != "multi_stream":
            return "unsafe_inplace only applies to multi_stream"
        return reason


@dataclass
class _InFlight:
    """Buffers of one micro-batch while its phases are issued."""

    batch: MicroBatch
    ops: LayerEmitter
    x: str
    shared: str | None = None
    routed: str = ""
    ids: str = ""
    weights: str = ""


class _Block:
    """The phases of one MoE block on one rank (see the module docstring)."""

    def __init__(self, builder: ProgramBuilder, dims: MoEDims, plan: BlockPlan, micro_batches: int) -> None:
        self.builder, self.dims, self.plan, self.par = builder, dims, plan, plan.par
        self.main = builder.current
        self.comm = builder.stream("comm") if micro_batches > 1 and self.par.all_to_all else self.main
        self.aux = builder.stream("aux") if plan.strategy == "multi_stream" else self.main

    def event(self, flight: _InFlight, name: str) -> str:
        return f"{self.plan.event_scope}ub{flight.batch.index}.{name}"

    def collective(self, flight: _InFlight, name: str, dur: float, nbytes: float, src: str, stream: str) -> str:
        """Launch a collective on ``stream`` (handing over from main and back through events if it is the
        comm stream); returns its output buffer (``src`` when it takes no time: one rank)."""
        if dur <= 0:
            return src
        out = f"{src}.{name}"
        if stream != self.main:
            ready = self.event(flight, f"{name}_in")
            self.builder.record(ready, self.main)
            self.builder.wait(ready, stream)
        self.builder.launch(comm_launch(name, dur, nbytes, flight.ops.profile, stream, (src,), (out,)), stream)
        if stream != self.main:
            self.builder.record(self.event(flight, f"{name}_out"), stream)
        return out

    def join(self, flight: _InFlight, name: str) -> None:
        if self.comm != self.main:
            self.builder.wait(self.event(flight, f"{name}_out"), self.main)

    def routed_bytes(self, flight: _InFlight) -> int:
        """Bytes of the micro-batch's routed rows that an all-to-all moves."""
        return flight.batch.tokens * self.dims.top_k * self.dims.hidden * flight.ops.elem_bytes

    def fork_and_gate(self, flight: _InFlight) -> None:
        """Phase A: the shared experts (forked to aux, or first on main), the gate, the dispatch."""
        builder, ops, strategy = self.builder, flight.ops, self.plan.strategy
        shared_width = self.par.shared_width(self.dims)
        if strategy == "multi_stream":
            ready, done = self.event(flight, "input_ready"), self.event(flight, "output_ready")
            builder.record(ready, self.main)
            with builder.using(self.aux):
                builder.wait(ready, self.aux)
                flight.shared = ops.shared(flight.x, shared_width, self.aux)
                builder.record(done, self.aux)
            if self.plan.unsafe_inplace:
                ops.scale_inplace(flight.x)
        elif strategy == "sequential" and self.dims.has_shared:
            flight.shared = ops.shared(flight.x, shared_width)
        flight.ids, flight.weights = ops.gate(flight.x)
        if strategy == "fused_shared":
            flight.ids, flight.weights = ops.fused_weights(flight.x, flight.ids, flight.weights)
        flight.routed = flight.x
        if self.par.all_to_all:
            nbytes = self.routed_bytes(flight)
            flight.routed = self.collective(flight, "dispatch", all_to_all_us(self._link, self.par.ep, nbytes),
                                            nbytes, flight.x, self.comm)

    def routed_experts(self, flight: _InFlight) -> None:
        """Phase B: the routed experts on the dispatched rows, the combine."""
        if self.par.all_to_all:
            self.join(flight, "dispatch")
        out = flight.ops.experts(flight.routed, flight.ids, flight.weights, flight.batch.view)
        if self.par.all_to_all:
            nbytes = self.routed_bytes(flight)
            out = self.collective(flight, "combine", all_to_all_us(self._link, self.par.ep, nbytes), nbytes, out,
                                  self.comm)
        flight.routed = out

    def join_and_add(self, flight: _InFlight) -> str:
        """Phase C: the join, the add of the shared output, the all-reduce; returns the block's output."""
        if self.par.all_to_all:
            self.join(flight, "combine")
        out = flight.routed
        if flight.shared is not None:
            if self.plan.strategy == "multi_stream":
                self.builder.wait(self.event(flight, "output_ready"), self.main)
            out = flight.ops.add(out, flight.shared, flight.ops.buf("out"))
        if self.par.tp == 1:
            return out
        nbytes = flight.batch.tokens * self.dims.hidden * flight.ops.elem_bytes
        return self.collective(flight, "all_reduce", all_reduce_us(self._link, self.par.tp, nbytes), nbytes, out,
                               self.main)

    @property
    def _link(self) -> LinkFigures:
        if self.plan.link is None:
            raise InputError(f"a layout with collectives (tp {self.par.tp}, ep {self.par.ep}) needs link figures")
        return self.plan.link


def emit_moe(builder: ProgramBuilder, dims: MoEDims, batches: Sequence[MicroBatch], plan: BlockPlan) -> list[str]:
    """Issue one rank's MoE block from the builder's current stream (main), ``plan`` checked against ``dims``
    (``BlockPlan.check``); returns each micro-batch's output buffer. Its inputs are ``{layer}.ub{i}.x``."""
    block = _Block(builder, dims, plan, len(batches))
    flights = []
    for batch in batches:
        ops = LayerEmitter(builder, dims, batch.tokens, f"{plan.layer}.ub{batch.index}")
        flights.append(_InFlight(batch, ops, ops.buf("x")))
    if not plan.interleaved:
        outputs = []
        for flight in flights:
            block.fork_and_gate(flight)
            block.routed_experts(flight)
            outputs.append(block.join_and_add(flight))
        return outputs
    for flight in flights:
        block.fork_and_gate(flight)
    for flight in flights:
        block.routed_experts(flight)
    return [block.join_and_add(flight) for flight in flights]
