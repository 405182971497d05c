"""Trace -> host program -> stream program.

:func:`import_trace` turns a :class:`Trace` into a :class:`HostTrace`: the chosen host thread's API calls in
host order (launches with their GPU ops and demands, event records and stream waits with the streams the
``cuda_sync`` records name, synchronizes), each placed at its *submission point* on the trace clock, plus the
enclosing ``record_function`` ranges of every launch. :func:`compile_program` writes it as an IR
:class:`~simulator.ir.Program` whose per-op ``host_us`` are the traced time between submission points, so the
host (an eager trace of small kernels is host-bound) is replayed as it ran.

Timing model fitted to the trace itself: a kernel starts ``gap`` after max(its submission, its stream's
previous end); ``gap`` is the median gap between back-to-back kernels on a busy stream, and the submission
point is the call start plus the median idle-stream launch latency minus ``gap`` (capped at the call).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Literal

from simulator.errors import InputError
from simulator.ir import HostCosts, Launch, Program, Record, SetStream, StreamSpec, Sync, Wait
from simulator.kineto.demand import Demand, kernel_demand
from simulator.kineto.events import CpuOp, GpuOp, HostCall, Range, Trace
from simulator.profile import Profile

LaunchMode = Literal["as-traced", "graph"]
ItemKind = Literal["launch", "record", "wait", "sync", "set_stream"]

_SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "hipDeviceSynchronize",
               "hipStreamSynchronize", "hipEventSynchronize")
_RECORD_CALLS = ("cudaEventRecord", "cudaEventRecordWithFlags", "hipEventRecord", "hipEventRecordWithFlags")
_WAIT_CALLS = ("cudaStreamWaitEvent", "hipStreamWaitEvent")


@dataclass(slots=True)
class Item:
    """One host-side operation. Traced items have a submission point ``t`` and a resume point ``resume``
    (later than ``t`` for a synchronize, whose traced wait the engine recomputes); added ones a host cost."""

    kind: ItemKind
    stream: int | str | None = None
    t: float | None = None
    resume: float | None = None
    cost: float = 0.0
    gpu: GpuOp | None = None
    demand: Demand | None = None
    event: str | None = None
    ranges: tuple[int, ...] = ()
    region: str | None = None
    cpu: CpuOp | None = None
    outer_cpu: CpuOp | None = None
    blocked_us: float = 0.0
    contended: bool = False
    transfer_us: float | None = None  # a collective's: it runs this long once its peers are there (comm.py)


@dataclass(slots=True)
class HostTrace:
    """The imported trace: host-ordered items and what the replay needs to time them."""

    items: list[Item]
    ranges: list[Range]
    device: int
    thread: int | None
    gap_us: float
    measured_us: float
    gpu_start: float
    streams: list[int]
    warnings: list[str] = field(default_factory=list)
    graph_ops: int = 0  # GPU ops launched by CUDA-graph replays (no module calls or ranges around them)

    @property
    def origin_us(self) -> float:
        """The trace-clock time that simulated time 0 stands for (the first host item's submission)."""
        return next((item.t for item in self.items if item.t is not None), self.gpu_start)


def import_trace(trace: Trace, profile: Profile, *, device: int | None = None,
                 thread: int | None = None) -> HostTrace:
    """Build the host program of one device and one host thread (the busiest ones unless named)."""
    warnings: list[str] = []
    by_device = Counter(op.device for op in trace.gpu_ops)
    if not by_device:
        raise InputError(f"{trace.source}: no GPU kernels or memcpys in the trace")
    if device is None:
        device = by_device.most_common(1)[0][0]
        if len(by_device) > 1:
            warnings.append(f"trace has GPU work on devices {sorted(by_device)}; replaying device {device} "
                            "(choose with --device)")
    elif device not in by_device:
        raise InputError(f"{trace.source}: no GPU work on device {device}; devices: {sorted(by_device)}")
    gpu_ops = sorted((op for op in trace.gpu_ops if op.device == device), key=lambda o: o.ts)
    gpu_ops = _fill_correlation(gpu_ops, trace)
    by_corr: dict[int, list[GpuOp]] = defaultdict(list)
    for op in gpu_ops:
        if op.corr is not None:
            by_corr[op.corr].append(op)
    launchers = Counter(c.tid for c in trace.host_calls if c.corr in by_corr)
    if thread is None and launchers:
        thread = launchers.most_common(1)[0][0]
        if len(launchers) > 1:
            warnings.append(f"kernels of device {device} were launched from threads {sorted(launchers)}; "
                            f"replaying thread {thread}'s program (choose with --thread)")
    elif thread is not None and thread not in launchers:
        raise InputError(f"{trace.source}: thread {thread} launched no GPU work on device {device}; "
                         f"launching threads: {sorted(launchers)}")
    calls = sorted((c for c in trace.host_calls if c.tid == thread), key=lambda c: c.ts)
    gpu_ops = _align_clocks(gpu_ops, calls, by_corr, warnings)
    by_corr = defaultdict(list)
    for op in gpu_ops:
        if op.corr is not None:
            by_corr[op.corr].append(op)
    gap, offset = _fit_timing(gpu_ops, calls, by_corr, profile)
    ranges = sorted([*(r for r in trace.ranges if r.tid == thread), *module_ranges(trace, thread)],
                    key=lambda r: (r.ts, -r.dur))
    cpu_ops = sorted((o for o in trace.cpu_ops if o.tid == thread), key=lambda o: (o.ts, -o.dur))
    items = _host_items(calls, by_corr, trace, offset, gap, warnings)
    launched = {id(item.gpu) for item in items if item.gpu is not None}
    ghosts = [op for op in gpu_ops if id(op) not in launched]
    if ghosts:
        if calls:
            warnings.append(f"{len(ghosts)} GPU ops have no launch call on thread {thread}; they are issued "
                            "at their traced start")
        items = _merge(items, [Item("launch", op.stream, t=op.ts - gap, gpu=op) for op in ghosts])
    _attach_context(items, ranges, cpu_ops)
    attach_demand(items, trace, device, profile)
    start = gpu_ops[0].ts
    end = max(op.ts + op.dur for op in gpu_ops)
    graph_ops = sum(len(by_corr.get(c.corr, ())) for c in calls if "GraphLaunch" in c.name)
    return HostTrace(items=items, ranges=ranges, device=device, thread=thread, gap_us=gap,
                     measured_us=end - start, gpu_start=start,
                     streams=sorted({op.stream for op in gpu_ops}), warnings=warnings, graph_ops=graph_ops)


def module_ranges(trace: Trace, thread: int | None) -> list[Range]:
    """The module calls of ``thread`` as ranges named by their class path (``/``-joined, outermost first):
    ``nn.Module`` events where the thread has them, else its ``forward`` frames (``file.py(N)``)."""
    calls = [r for r in trace.modules if r.tid == thread] or [r for r in trace.frames if r.tid == thread]
    calls.sort(key=lambda r: (r.ts, -r.dur))
    paths: dict[str, str] = {}
    stack: list[tuple[float, str]] = []  # (end, path) of the calls enclosing the next one
    out = []
    for call in calls:
        end = call.ts + call.dur
        while stack and stack[-1][0] < end:
            stack.pop()
        path = f"{stack[-1][1]}/{call.name}" if stack else call.name
        path = paths.setdefault(path, path)
        stack.append((end, path))
        out.append(call._replace(name=path))
    return out


def _merge(items: list[Item], extra: list[Item]) -> list[Item]:
    """Insert ``extra`` (each with a time) into host order; untimed items keep following their leader."""
    keyed = []
    t = float("-inf")
    for n, item in enumerate(items):
        t = item.t if item.t is not None else t
        keyed.append((t, 0, n, item))
    keyed += [(item.t, 1, n, item) for n, item in enumerate(extra)]
    keyed.sort(key=lambda k: k[:3])
    return [k[3] for k in keyed]


def _fill_correlation(ops: list[GpuOp], trace: Trace) -> list[GpuOp]:
    """GPU ops without ``args.correlation`` take the id of the ``ac2g`` flow that ends on them."""
    if all(op.corr is not None for op in ops) or not trace.flows:
        return ops
    ends = {(f.tid, round(f.ts, 3)): f.id for f in trace.flows if f.phase == "f"}
    return [op if op.corr is not None else op._replace(corr=ends.get((op.stream, round(op.ts, 3))))
            for op in ops]


def _align_clocks(ops: list[GpuOp], calls: list[HostCall], by_corr: dict[int, list[GpuOp]],
                  warnings: list[str]) -> list[GpuOp]:
    """A GPU op cannot start before its launch call; if the clocks say otherwise, shift the GPU clock."""
    lead = [g.ts - c.ts for c in calls if c.corr in by_corr for g in by_corr[c.corr]]
    if not lead or min(lead) >= 0:
        return ops
    shift = -min(lead)
    warnings.append(f"GPU clock runs {shift:.3f} µs behind the host clock (kernels before their launches); "
                    "shifted")
    return [op._replace(ts=op.ts + shift) for op in ops]


def _fit_timing(ops: list[GpuOp], calls: list[HostCall], by_corr: dict[int, list[GpuOp]],
                profile: Profile) -> tuple[float, float]:
    """(device gap between kernels, submission offset after a launch call's start), from the trace."""
    prev_end: dict[int, float] = {}
    busy_gaps: list[float] = []
    call_of = {c.corr: c for c in calls if c.corr is not None}
    idle_lat: list[float] = []
    for op in ops:
        before = prev_end.get(op.stream)
        call = call_of.get(op.corr) if op.corr is not None else None
        if before is not None and call is not None and call.ts + call.dur < before:
            busy_gaps.append(op.ts - before)
        elif call is not None and (before is None or before < call.ts):
            idle_lat.append(op.ts - call.ts)
        prev_end[op.stream] = max(before or op.ts, op.ts + op.dur)
    gap = max(0.0, statistics.median(busy_gaps)) if busy_gaps else profile.host.kernel_gap_us.value
    if idle_lat:
        offset = max(0.0, statistics.median(idle_lat) - gap)
    else:
        offset = statistics.median(c.dur for c in calls) if calls else 0.0
    return gap, offset


def _host_items(calls: list[HostCall], by_corr: dict[int, list[GpuOp]], trace: Trace, offset: float,
                gap: float, warnings: list[str]) -> list[Item]:
    """Host items in call order. A launch is submitted ``offset`` into its call, except where the trace shows
    when: a kernel that found its stream idle started ``gap`` after its submission, which lies inside its
    launch call (so a slow launch call, e.g. a library's first call, is replayed as slow; a kernel that started
    after its call returned waited for something else: a wait, or SMs held by another stream). The GPU ops of
    one call (a graph launch) are each submitted where they started, and the items are then ordered by
    submission (a synchronize by its resume). ``blocked_us``: how long a kernel started after its stream, its
    waits and its submission allowed (the device was busy with another stream's work)."""
    syncs = {s.corr: s for s in trace.syncs
             if s.corr is not None and (s.wait_on_stream is not None or s.event_id is not None)}
    record_stream = {s.record_corr: s.wait_on_stream for s in syncs.values()
                     if s.record_corr is not None and s.wait_on_stream is not None}
    by_event_id = any(s.record_corr is None and s.wait_on_stream is None for s in syncs.values())
    records: list[list[int | None]] = []  # [corr, event id or None] of every record call (event-id-only traces)
    current: int | str | None = None  # stream of the last launch: where an un-named record goes
    items: list[Item] = []
    unknown_waits = 0
    paired_by_order = 0
    done = float("-inf")  # when the GPU work launched so far ended
    stream_end: dict[int, float] = {}
    event_end: dict[str, float] = {}  # when the work an event recorded ended (trace clock)
    pending: dict[int | str, float] = {}  # per stream: when the work its queued waits wait for ends
    regraph = False
    for call in calls:
        gpu = by_corr.get(call.corr) if call.corr is not None else None
        t = call.ts + min(call.dur, offset)
        if gpu:
            done = max(done, *(op.ts + op.dur for op in gpu))
            ops = sorted(gpu, key=lambda o: o.ts)
            regraph |= len(ops) > 1
            for k, op in enumerate(ops):
                before = stream_end.get(op.stream, float("-inf"))
                idle = before < call.ts
                dependency = pending.pop(op.stream, float("-inf"))
                if len(ops) > 1:  # a graph launch: each node submitted where it started
                    start = max(call.ts, op.ts - gap)
                else:  # a kernel is submitted before its launch call returns
                    start = max(call.ts, min(op.ts - gap, call.ts + call.dur)) if idle else t
                blocked = 0.0 if len(ops) > 1 else max(0.0, op.ts - max(before, dependency, start) - gap)
                items.append(Item("launch", op.stream, t=start if k == 0 or len(ops) > 1 else None, gpu=op,
                                  blocked_us=blocked))
                stream_end[op.stream] = max(stream_end.get(op.stream, op.ts), op.ts + op.dur)
                current = op.stream
        elif call.name in _RECORD_CALLS and (call.corr in record_stream or (by_event_id and current is not None)):
            stream = record_stream.get(call.corr, current)
            items.append(Item("record", stream, t=t, event=f"ev{call.corr}"))
            event_end[f"ev{call.corr}"] = stream_end.get(stream, float("-inf"))
            records.append([call.corr, None])
        elif call.name in _WAIT_CALLS:
            sync = syncs.get(call.corr)
            if sync is None:
                unknown_waits += 1
                continue
            if sync.record_corr is None and sync.wait_on_stream is None:
                # only the CUDA event is named: the latest record call not already tied to another event
                record = next((r for r in reversed(records) if r[1] in (None, sync.event_id)), None)
                if record is None:
                    unknown_waits += 1
                    continue
                record[1] = sync.event_id
                paired_by_order += 1
                items.append(Item("wait", sync.stream, t=t, event=f"ev{record[0]}"))
                ends = event_end.get(f"ev{record[0]}", float("-inf"))
            elif sync.record_corr is None:  # older Kineto: no record id; wait for what the source holds now
                items.append(Item("record", sync.wait_on_stream, t=t, event=f"w{call.corr}"))
                items.append(Item("wait", sync.stream, event=f"w{call.corr}"))
                ends = stream_end.get(sync.wait_on_stream, float("-inf"))
            else:
                items.append(Item("wait", sync.stream, t=t, event=f"ev{sync.record_corr}"))
                ends = event_end.get(f"ev{sync.record_corr}", float("-inf"))
            pending[sync.stream] = max(pending.get(sync.stream, float("-inf")), ends)
        elif call.name in _SYNC_CALLS:
            # the engine recomputes the wait; the host resumes from when the traced GPU went idle
            items.append(Item("sync", t=t, resume=max(t, min(call.ts + call.dur, done))))
    if paired_by_order:
        warnings.append(f"{paired_by_order} stream waits name only their CUDA event: each was paired with the "
                        "latest event record before it (recorded on the stream of the launch before that record)")
    if unknown_waits:
        warnings.append(f"{unknown_waits} cudaStreamWaitEvent calls without cuda_sync records: their "
                        "cross-stream dependencies are unknown and not replayed")
    if regraph:
        order = sorted(range(len(items)), key=lambda n: (_key_time(items[n]), n))
        items = [items[n] for n in order]
    return items


def _key_time(item: Item) -> float:
    t = item.resume if item.kind == "sync" else item.t
    return float("inf") if t is None else t


def _attach_context(items: list[Item], ranges: list[Range], cpu_ops: list[CpuOp]) -> None:
    """Enclosing ranges and module calls (indices, outer first) and innermost/outermost operator of every traced
    item."""
    range_stack: list[int] = []
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}  # one tuple per distinct nesting
    op_stack: list[CpuOp] = []
    ri = oi = 0
    last_t = float("-inf")
    for item in items:
        if item.t is not None:
            last_t = item.t
        x = last_t
        while ri < len(ranges) and ranges[ri].ts <= x:
            range_stack = [j for j in range_stack if ranges[j].end >= ranges[ri].ts]
            range_stack.append(ri)
            ri += 1
        range_stack = [j for j in range_stack if ranges[j].end >= x]
        while oi < len(cpu_ops) and cpu_ops[oi].ts <= x:
            op_stack = [o for o in op_stack if o.ts + o.dur >= cpu_ops[oi].ts]
            op_stack.append(cpu_ops[oi])
            oi += 1
        op_stack = [o for o in op_stack if o.ts + o.dur >= x]
        key = tuple(range_stack)
        item.ranges = shared.setdefault(key, key)
        item.region = ranges[range_stack[-1]].name if range_stack else None
        if item.kind == "launch" and op_stack:
            item.cpu = op_stack[-1]
            item.outer_cpu = op_stack[0]


def attach_demand(items: list[Item], trace: Trace, device: int, profile: Profile) -> None:
    """Each GPU op's demand. An op that overlapped a GPU op of another stream in the trace ran under
    contention already: its traced duration includes the slowdown, so it gets no demand (the sharing model
    must not slow it, nor its partner, a second time), and the time it waited for the device after its
    stream, its waits and its submission allowed it to start (``blocked_us``) is replayed as part of it."""
    busy: dict[int, float] = defaultdict(float)
    for item in items:
        if item.gpu is not None and item.cpu is not None:
            busy[id(item.cpu)] += item.gpu.dur
    dev = trace.devices.get(device)
    contended = overlapped_ops([item.gpu for item in items if item.gpu is not None])
    shared: dict[Demand, Demand] = {}  # one record per distinct demand
    for item in items:
        if item.gpu is not None:
            cpu_busy = busy[id(item.cpu)] if item.cpu is not None else 0.0
            demand = kernel_demand(item.gpu, item.cpu, cpu_busy, dev, profile)
            item.contended = id(item.gpu) in contended
            if item.contended:
                demand = demand._replace(sm=0.0, bw=0.0, tc=0.0, blocks=None, blocks_per_sm=None,
                                         warps_per_block=None)
            item.demand = shared.setdefault(demand, demand)


def drop_operators(*item_lists: list[Item]) -> None:
    """Forget the launching operators (read only by :func:`attach_demand` and the what-if's join search): a
    share of a trace's memory that the replays can use instead."""
    for items in item_lists:
        for item in items:
            item.cpu = item.outer_cpu = None


def overlapped_ops(ops: list[GpuOp]) -> set[int]:
    """``id()`` of every op whose traced interval overlaps an op of another stream (by more than 1 ns)."""
    found: set[int] = set()
    active: list[GpuOp] = []
    for op in sorted(ops, key=lambda o: o.ts):
        active = [a for a in active if a.ts + a.dur > op.ts + 1e-3]
        for other in active:
            if other.stream != op.stream:
                found.add(id(op))
                found.add(id(other))
        active.append(op)
    return found


def stream_name(stream: int | str | None) -> str:
    return stream if isinstance(stream, str) else f"stream{stream}"


def compile_program(host: HostTrace, items: list[Item], profile: Profile, launch: LaunchMode,
                    name: str = "trace", host_scale: float = 1.0, comm_bounds: list[float] | None = None) -> Program:
    """The IR program of ``items``: traced host time between submission points (as-traced; multiplied by
    ``host_scale``, e.g. to take a profiler's own slowdown of the host out), or one graph replay of the same
    kernels (``graph``: the replay's host cost once, then the profile's node gap: a gap measured without a
    profiler, which widens the gaps between graph nodes)."""
    graph = launch == "graph"
    if graph:
        costs = profile.host_costs("graph")
    else:
        costs = HostCosts(**{**profile.host_costs("eager").model_dump(), "kernel_gap_us": host.gap_us,
                             "idle_launch_us": 0.0})  # the traced host time holds what launching cost
    if any(item.transfer_us is not None for item in items):  # collectives: bounded by their peers
        from simulator.kineto.comm import bound_comm, traced_bounds  # (comm imports this module)

        first = costs.replay_us if graph else 0.0
        anchor = host.gpu_start - first - costs.kernel_gap_us if graph else host.origin_us
        items = bound_comm(items, traced_bounds(items, anchor) if comm_bounds is None else comm_bounds, first,
                           costs.kernel_gap_us + costs.join_gap_us)
    ops = []
    streams: dict[str, StreamSpec] = {}
    resume: float | None = None
    first = True
    for item in items:
        if item.kind == "sync" and graph:
            continue
        if graph:
            host_us = costs.replay_us if first and item.kind == "launch" else 0.0
            first = first and item.kind != "launch"
        elif item.t is None:
            host_us = item.cost
        else:
            host_us = (item.t - resume) * host_scale if resume is not None else 0.0
            resume = item.resume if item.resume is not None else item.t
        host_us = max(host_us, 0.0)
        ops.append(_ir_op(item, host_us))
        if item.stream is not None:
            streams.setdefault(stream_name(item.stream), StreamSpec(kind="nonblocking"))
    return Program(name=name, streams=streams, host=costs, ops=tuple(ops))


_SET = {cls: frozenset(cls.model_fields) - {"op"} for cls in (Launch, Record, Wait, SetStream, Sync)}


def _ir_op(item: Item, host_us: float) -> Launch | Record | Wait | SetStream | Sync:
    """The IR op of ``item``. Built without pydantic's per-op validation (and with one shared fields-set): a
    trace's values are checked here (finite, in range), and a validated op costs twice the memory and most of
    the compile time of a trace of a million ops."""
    stream = stream_name(item.stream)
    if not math.isfinite(host_us):
        raise InputError(f"a host time of {host_us} µs between traced calls: the trace's timestamps are not finite")
    if item.kind == "launch":
        gpu = item.gpu
        demand = item.demand
        assert gpu is not None and demand is not None
        dur = gpu.dur + item.blocked_us if item.contended else gpu.dur
        if item.transfer_us is not None:
            dur = item.transfer_us
        if not math.isfinite(dur):
            raise InputError(f"GPU op {gpu.name!r} at {gpu.ts} µs has a duration of {dur} µs")
        return Launch.model_construct(_SET[Launch], kernel=gpu.name or "<unnamed>", stream=stream, dur_us=dur,
                                      sm=demand.sm, bw=demand.bw, tc=demand.tc, family=demand.family,
                                      region=item.region, host_us=host_us, blocks=demand.blocks,
                                      blocks_per_sm=demand.blocks_per_sm, warps_per_block=demand.warps_per_block)
    if item.kind == "record":
        return Record.model_construct(_SET[Record], event=item.event or "", stream=stream, host_us=host_us)
    if item.kind == "wait":
        return Wait.model_construct(_SET[Wait], event=item.event or "", stream=stream, host_us=host_us)
    if item.kind == "set_stream":
        return SetStream.model_construct(_SET[SetStream], stream=stream, host_us=host_us)
    return Sync.model_construct(_SET[Sync], host_us=host_us)
