"""The SimPy engine: one host thread issuing ops, FIFO streams, events, and a device shared by the kernels
that run at the same time.

Semantics (each one is tested against a hand-computed timeline):
- a kernel starts after its stream's previous item finished, every wait queued before it on that stream is
  satisfied, and the kernel's device gap (``kernel_gap_us`` eager, ``node_gap_us`` in a replay) has passed, once
  per device kernel of a launch that stands for several run one after another (``Launch.kernels``);
- ``record`` snapshots the number of items queued on its stream at call time; re-recording overwrites the
  snapshot and does not affect waits issued earlier; a ``wait`` on a never-recorded event is a no-op;
- ``wait_stream(a, b)`` records a fresh event on ``b`` and makes ``a`` wait on it;
- the legacy ``default`` stream waits for all ``blocking`` streams and they wait for it; ``nonblocking``
  streams have no implicit ordering with it;
- ``sync`` blocks the host until the device is idle; at most ``queue_depth`` launches wait to start before
  the host blocks;
- running kernels progress at the rates the sharing model gives them, re-solved at every start and end; a
  model that places kernels (``PlacingModel``) places each one once, when it starts, among those running.

Speed: records, waits and stream switches only change queue order, never device timing, so their host cost is
folded into the next launch's delay. The host runs ahead without a SimPy event while its next call falls
strictly before the next scheduled event and only appends to streams that are busy (so it cannot change any
start time); it sleeps on an event when that call would start work, at a tie with another event, and blocks at
a sync or a full queue. Events are queued at exact times through :mod:`simulator.simpy_adapter`, each taking its
id when the first engine would have created its timeout: events at the same time then run in that engine's
order, even when one is pushed later. That lets a kernel's completion wait until the end of the callback that
changed its rate (a rate re-solved twice at one instant, as when two kernels start together, schedules one
completion, not two), and a host wake-up wait until the callback shows whether the host can run ahead instead.
Eager programs are translated in one pass from the ops (programs that capture graphs go through :func:`expand`
first) into :class:`PlanEntry` records, each launch's kernel made then; under the default fluid model a
kernel's solo rate is solved once per distinct demand and the rates of a pair once per pair of demands
(:meth:`FluidSharing.pair_rates`), host spans are built only when read, and the garbage collector is paused
while the engine runs (a run leaves no reference cycles: a kernel lets go of its completion event once it ends).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import TypeVar

from simulator.expand import default_costs, expand, never_recorded
from simulator.ir import Op, Program, gc_paused
from simulator.result import FlowArrow, HostSpan, KernelRun, SimResult
from simulator.sharing import Demand, FluidSharing, PlacingModel, SharingModel
from simulator.simpy_adapter import Due, Scheduler

_EPS = 1e-9
_tuple_new = tuple.__new__
_T = TypeVar("_T")

# What the host does with each issued op (a plan entry's ``what``).
_LAUNCH, _SYNC, _RECORD, _WAIT, _WAIT_STREAM, _HOLD = range(6)
# Op kinds that only ``expand`` unrolls.
_CAPTURE_KINDS = frozenset({"capture_begin", "capture_end", "replay"})


# The engine's records are made by plain functions (``_kernel``, ``_plan_entry``, ``_wait_item``) that call the
# class without ``__init__`` and set the fields: Python 3.11 runs an ``__init__`` in a fresh interpreter frame, a
# plain function inline (``__init__`` methods cost at least 1 % of the instructions per kernel: engine_instructions.py).


class _Kernel:
    """A launched kernel: what it is (set when the plan is made), then its progress on the device.

    ``index``: its op's index; ``gap``: the device gap before it starts; ``replay``: the replay it belongs to
    (None: eager); ``remaining``: solo µs of work left; ``demand_id``: equal demands share one; ``solo``: its
    rate alone under the default fluid model (0 under another model: not read); ``geometry``: (blocks, blocks
    per SM, warps per block or None) where the launch says, and ``library``: the library kernel it runs where the
    launch names one (else its own name), both read by a placing model, which sets ``placed`` when
    the kernel starts (and ``hold``, the time its packed blocks end, where the placement has a ``tail``; once its
    other blocks are done it holds only the packed ones' SMs until then: ``floor``, the time it ends no sooner than);
    ``queued``: its completion is still to be pushed. Set when it starts: ``start``,
    ``updated`` (when ``remaining`` was last brought up to date) and ``rate``; when its rate changes: ``at`` and
    ``eid`` (its completion's time and event id), then ``event`` (the completion pushed; an earlier one is
    superseded)."""

    __slots__ = ("at", "demand", "demand_id", "eid", "event", "floor", "gap", "geometry", "hold", "index", "library",
                 "name", "placed", "queued", "rate", "region", "remaining", "replay", "solo", "start", "stream",
                 "updated")


def _kernel(index: int, stream: _Stream, gap: float, replay: int | None, name: str, region: str | None,
            dur_us: float, demand: Demand, demand_id: int, solo: float) -> _Kernel:
    kernel = _Kernel()
    kernel.index = index
    kernel.stream = stream
    kernel.gap = gap
    kernel.replay = replay
    kernel.name = kernel.library = name
    kernel.region = region
    kernel.remaining = dur_us
    kernel.demand = demand
    kernel.demand_id = demand_id
    kernel.solo = solo
    kernel.geometry = None
    kernel.placed = None
    kernel.floor = kernel.hold = 0.0
    kernel.queued = False
    return kernel


class PlanEntry:
    """One op as the host issues it: ``what`` it does (``_LAUNCH`` ... ``_HOLD``), its ``host_us`` and its op
    ``index``; ``stream``: the stream it acts on (launch, record, wait, wait_stream); ``event``: the event
    recorded or waited on, or a wait_stream's flow label; ``on``: the stream a wait_stream waits for;
    ``kernel``: the kernel a launch queues."""

    __slots__ = ("event", "host_us", "index", "kernel", "on", "stream", "what")


def _plan_entry(what: int, host_us: float, index: int, stream: _Stream | None, event: str, on: _Stream | None,
                kernel: _Kernel | None) -> PlanEntry:
    entry = PlanEntry()
    entry.what = what
    entry.host_us = host_us
    entry.index = index
    entry.stream = stream
    entry.event = event
    entry.on = on
    entry.kernel = kernel
    return entry


class _WaitItem:
    """A wait queued on a stream: for ``target``'s first ``count`` items; ``event`` labels its flow arrow."""

    __slots__ = ("count", "event", "target")


def _wait_item(target: _Stream, count: int, event: str) -> _WaitItem:
    item = _WaitItem()
    item.target = target
    item.count = count
    item.event = event
    return item


class _Stream:
    __slots__ = ("busy", "busy_us", "done", "done_times", "enqueued", "kind", "legacy", "name", "queue",
                 "waiters")

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        self.queue: deque[_Kernel | _WaitItem] = deque()
        self.enqueued = 0
        self.done = 0
        self.busy = False
        self.busy_us = 0.0
        self.done_times: list[float] = []
        self.waiters: list[tuple[int, _Stream]] = []
        self.legacy: list[_Stream] = []  # streams a launch here implicitly waits for (legacy default stream)


class Engine:
    """Simulates one program; use :func:`simulate`."""

    def __init__(self, program: Program, sharing: SharingModel | None = None) -> None:
        self.program = program
        self.sharing = sharing or FluidSharing()
        self.scheduler = Scheduler()
        self.now = 0.0  # the time of the event whose callbacks run
        self.streams = {name: _Stream(name, spec.kind) for name, spec in program.streams.items()}
        blocking = [s for s in self.streams.values() if s.kind == "blocking"]
        default = [s for s in self.streams.values() if s.kind == "default"]
        for s in self.streams.values():
            s.legacy = blocking if s.kind == "default" else default if s.kind == "blocking" else []
        self._fluid = self.sharing if type(self.sharing) is FluidSharing else None
        self._placing: PlacingModel | None = self.sharing if isinstance(self.sharing, PlacingModel) else None
        self.events: dict[str, tuple[_Stream, int]] = {}
        self.running: list[_Kernel] = []
        self.outstanding = 0
        self.pending_launches = 0
        self.kernels: list[KernelRun] = []
        self._host_log: list[float] = []  # flat (host time, first plan entry, end) per costed batch
        self.flows: list[FlowArrow] = []
        self.host_end = 0.0
        self._plan: list[PlanEntry] = []
        self._next = 0
        self._held_from = 0  # the first plan entry of the records and waits held since the last launch
        self._held_cost = 0.0
        self._paid = False
        self._blocked: str | None = None
        self._depth = program.host.queue_depth
        self._idle_launch = program.host.idle_launch_us
        self._wake: tuple[float, int] | None = None  # (time, event id) of a host wake-up not yet pushed
        self._due: list[_Kernel] = []  # kernels whose completion is still to be pushed
        self._pairs: dict[tuple[int, int], tuple[float, float]] = {}  # fluid rates per pair of demand ids
        self._on_complete = [self._complete]  # callback lists shared by the events pushed
        self._on_gap = [self._gap_passed]
        self._on_wake = [self._host_wake]

    def run(self) -> SimResult:
        try:
            return _without_gc(self._run)
        finally:
            self._on_complete = self._on_gap = self._on_wake = []  # bound methods: no cycle outlives the run

    def _run(self) -> SimResult:
        self._plan, warnings = self._translate_program()
        self._host_run(0.0, False)
        self._callback_done()
        self.scheduler.run()
        stuck = [s.name for s in self.streams.values() if s.queue]
        if stuck or self._next < len(self._plan):
            raise RuntimeError(f"simulation stalled; streams with queued work: {stuck}")
        kernels = self.kernels
        makespan = kernels[-1].end_us if kernels else 0.0  # kernels are logged as they end, in time order
        kernels.sort(key=itemgetter(3, 4, 0))  # (start_us, end_us, index)
        log = self._host_log
        plan = self._plan
        costs = [entry.host_us for entry in plan] if log else []
        indices = [entry.index for entry in plan] if log else []
        self._plan = []  # freed while the collector is paused: only the results outlive the run
        return SimResult(
            makespan_us=makespan,
            host_end_us=self.host_end,
            kernels=kernels,
            streams={name: s.busy_us for name, s in self.streams.items()},
            host_spans=partial(_without_gc, _host_spans, log, costs, indices, self.program.ops),
            flows=self.flows,
            warnings=warnings,
        )

    # -- plan ---------------------------------------------------------------------------------------
    def _translate_program(self) -> tuple[list[PlanEntry], list[str]]:
        """The plan and the warnings: straight from the ops, or from :func:`expand` if graphs are captured."""
        ops = self.program.ops
        plan, warnings = self._translate(zip(ops, range(len(ops)), repeat(None), repeat(None)))
        if plan is None:
            expansion = expand(self.program)
            plan, _ = self._translate(expansion.issued)  # only eager ops' warnings are right: take expand's
            warnings = expansion.warnings
        return plan, warnings

    def _translate(self, issued: Iterable[tuple[Op, int, float | None, int | None]]
                   ) -> tuple[list[PlanEntry] | None, list[str]]:
        """Issued ops ``(op, index, host_us, replay)`` as plan entries, and warnings about waits on events not
        recorded before; ``host_us`` None: the op's own or the program's default. None for the plan when an op
        is one only :func:`expand` unrolls. Equal demands share one id (and their solo rate is solved once)."""
        streams = self.streams
        host = self.program.host
        costs = default_costs(host)
        gaps = (host.kernel_gap_us, host.node_gap_us)
        join_gaps = (host.join_gap_us, host.node_join_gap_us)
        recorded_on: dict[str, str] = {}
        joined: set[str] = set()  # streams whose next kernel follows a wait on another stream's event
        forked: set[int] = set()  # replays whose first cross-stream edge has been issued
        first_fork: set[str] = set()  # streams whose next kernel pays the replay's first-fork gap
        first_fork_gap = host.first_fork_gap_us

        def cross_stream_edge(stream: str, other: str, replay: int | None) -> None:
            """``stream`` waits on work of ``other``: its next kernel pays the join gap, and both streams' next
            kernels the replay's first-fork gap if this is the replay's first such edge."""
            joined.add(stream)
            if replay is not None and replay not in forked and first_fork_gap:
                forked.add(replay)
                first_fork.update((stream, other))

        solo = self._fluid.solo_rate if self._fluid is not None else _not_solved
        placing = self._placing is not None
        demands: dict[Demand, tuple[int, float]] = {}
        recorded: set[str] = set()
        warnings: list[str] = []
        plan = []
        append = plan.append
        for op, index, cost, replay in issued:
            fields = op.__dict__
            kind = fields["op"]
            if cost is None:
                cost = fields["host_us"]
                if cost is None:
                    cost = costs.get(kind, 0.0)
            if kind == "launch":
                demand = (fields["sm"], fields["bw"], fields["tc"])
                known = demands.get(demand)
                if known is None:
                    known = demands[demand] = (len(demands), solo(demand))
                gap = gaps[replay is not None] * fields["kernels"]
                if joined and fields["stream"] in joined:
                    joined.discard(fields["stream"])
                    gap += join_gaps[replay is not None]
                if first_fork and fields["stream"] in first_fork:
                    first_fork.discard(fields["stream"])
                    gap += first_fork_gap
                stream = streams[fields["stream"]]
                kernel = _kernel(index, stream, gap, replay, fields["kernel"], fields["region"], fields["dur_us"],
                                 demand, known[0], known[1])
                if placing and fields["blocks"] is not None and fields["blocks_per_sm"] is not None:
                    kernel.geometry = (fields["blocks"], fields["blocks_per_sm"], fields["warps_per_block"])
                    kernel.library = fields["library_kernel"] or kernel.name
                append(_plan_entry(_LAUNCH, cost, index, stream, "", None, kernel))
            elif kind == "record":
                event = fields["event"]
                recorded.add(event)
                recorded_on[event] = fields["stream"]
                append(_plan_entry(_RECORD, cost, index, streams[fields["stream"]], event, None, None))
            elif kind == "wait":
                event = fields["event"]
                if event not in recorded:
                    warnings.append(never_recorded(index, event))
                elif recorded_on[event] != fields["stream"]:
                    cross_stream_edge(fields["stream"], recorded_on[event], replay)
                append(_plan_entry(_WAIT, cost, index, streams[fields["stream"]], event, None, None))
            elif kind == "sync":
                append(_plan_entry(_SYNC, cost, index, None, "", None, None))
            elif kind == "wait_stream":
                on = fields["on"]
                if on != fields["stream"]:
                    cross_stream_edge(fields["stream"], on, replay)
                append(_plan_entry(_WAIT_STREAM, cost, index, streams[fields["stream"]], f"wait_stream:{on}",
                                   streams[on], None))
            elif replay is None and kind in _CAPTURE_KINDS:
                return None, warnings
            else:
                append(_plan_entry(_HOLD, cost, index, None, "", None, None))
        return plan, warnings

    # -- host ---------------------------------------------------------------------------------------
    def _host_run(self, t: float, nested: bool) -> None:
        """Issue ops from host time ``t`` until the host must spend time (before a launch or sync) or block.

        ``t`` is ``self.now``, or later while the host runs ahead (nothing is scheduled before ``t`` then,
        and only what cannot depend on the time is done ahead). ``nested``: called from inside another
        event's callback, which may still schedule events: the host's next wake-up is settled when that
        callback ends. Nothing called from here re-enters it, so the cursor lives in a local."""
        plan = self._plan
        end = len(plan)
        held_from = self._held_from
        cost = self._held_cost
        i = self._next
        self._blocked = None
        while i < end:
            item = plan[i]
            what = item.what
            if what >= _RECORD:
                cost += item.host_us
                i += 1
                continue
            if not self._paid:
                self._paid = True
                delay = cost + item.host_us
                if delay > 0:
                    self._next = i
                    self._held_cost = cost
                    self._host_log += (t, held_from, i + 1)
                    t += delay
                    if nested:
                        self._wake = (t, self.scheduler.new_id())  # the id its timeout would have taken now
                        return
                    if t >= self._peek():
                        self._sleep_until(t)
                        return
            if what == _LAUNCH and self.pending_launches >= self._depth:
                self._next = i
                self._held_cost = cost
                self._blocked = "queue"
                return
            # Issued ahead of time (t > now) only if doing it now does what doing it at t would, nothing on
            # the device happening in between: records and waits only append (a stream that is not busy has
            # nothing queued or an unfinished wait at its head), so only a launch onto an idle stream waits.
            if t != self.now and what == _LAUNCH and not (item.stream.busy or item.stream.queue):
                self._next = i
                self._held_cost = cost
                self._sleep_until(t)
                return
            if held_from < i:
                self._apply_held(held_from, i)
            i += 1
            self._held_from = held_from = i
            self._held_cost = cost = 0.0
            self._paid = False
            if what == _LAUNCH:
                stream = item.stream
                if self._idle_launch and not (stream.busy or stream.queue) and item.kernel.replay is None:
                    cost = self._idle_launch  # paid before the host's next op: the launch returns later
                for other in stream.legacy:
                    self._wait(stream, other, other.enqueued, "legacy-default-sync")
                self.pending_launches += 1
                stream.queue.append(item.kernel)  # as _wait queues its item
                stream.enqueued += 1
                self.outstanding += 1
                if not stream.busy:
                    self._advance(stream)
            elif self.outstanding:
                self._next = i
                self._blocked = "sync"
                return
        self._next = i
        if cost > 0:
            self._host_log += (t, held_from, i)
        self._apply_held(held_from, i)
        self._held_from = i
        self._held_cost = 0.0
        self.host_end = t + cost

    def _peek(self) -> float:
        """The time of the next event, completions not pushed yet included."""
        if self._due:
            self._push_due()
        return self.scheduler.next_time()

    def _sleep_until(self, t: float) -> None:
        """Wake the host at exactly ``t`` (the time it reached by adding its costs up)."""
        self.scheduler.schedule(t, self._on_wake, None)

    def _host_wake(self, event: Due) -> None:
        self.now = now = event.at
        self._host_run(now, False)
        self._callback_done()

    def _callback_done(self) -> None:
        """At the end of a callback: push the completions it changed; settle a host wake-up it asked for by
        running the host ahead to it if nothing is scheduled before, else by pushing the wake-up (with the id
        it took when the host asked)."""
        if self._due:
            self._push_due()
        wake = self._wake
        if wake is None:
            return
        self._wake = None
        t, eid = wake
        if t >= self.scheduler.next_time():
            self.scheduler.push(t, eid, self._on_wake, None)
        elif self.pending_launches >= self._depth and self._plan[self._next].what == _LAUNCH:
            self._blocked = "queue"  # what the host finds at t (the launch is paid for)
        else:
            self._host_run(t, False)
            if self._due:  # the host did launch at once (its wake-up time rounded to now)
                self._push_due()

    def _apply_held(self, start: int, stop: int) -> None:
        """Apply the records, waits and stream switches held since the last launch (plan entries ``start`` to
        ``stop``), in host order."""
        events = self.events
        for item in self._plan[start:stop]:
            what = item.what
            if what == _RECORD:
                stream = item.stream
                events[item.event] = (stream, stream.enqueued)
            elif what == _WAIT:
                snapshot = events.get(item.event)
                if snapshot is not None:
                    self._wait(item.stream, snapshot[0], snapshot[1], item.event)
            elif what == _WAIT_STREAM:
                on = item.on
                self._wait(item.stream, on, on.enqueued, item.event)

    def _wait(self, stream: _Stream, target: _Stream, count: int, event: str) -> None:
        """Queue a wait for ``target``'s first ``count`` items on ``stream`` unless it is already satisfied."""
        if target is stream or target.done >= count:
            return
        stream.queue.append(_wait_item(target, count, event))
        stream.enqueued += 1
        self.outstanding += 1
        if not stream.busy:
            self._advance(stream)

    # -- streams ------------------------------------------------------------------------------------
    def _advance(self, stream: _Stream) -> None:
        """Start what the head of ``stream`` allows: pass satisfied waits, start the next kernel."""
        queue = stream.queue
        while queue and not stream.busy:
            head = queue[0]
            if type(head) is _WaitItem:
                target = head.target
                count = head.count
                if target.done < count:
                    target.waiters.append((count, stream))
                    return
                queue.popleft()
                ready = target.done_times[count - 1]
                self.flows.append(_tuple_new(FlowArrow, (head.event, target.name, ready, stream.name, self.now)))
                self._item_done(stream)
                continue
            queue.popleft()
            gap = head.gap
            if gap <= 0 and head.remaining <= _EPS:
                self._launch_started()
                self._record_run(head, self.now)
                self._item_done(stream)
                continue
            stream.busy = True
            if gap > 0:
                self.scheduler.schedule(self.now + gap, self._on_gap, head)
            else:
                self._start(head)

    def _item_done(self, stream: _Stream) -> None:
        stream.done += 1
        stream.done_times.append(self.now)
        self.outstanding -= 1
        waiters = stream.waiters
        if waiters:
            done = stream.done
            if len(waiters) == 1:
                if waiters[0][0] <= done:
                    stream.waiters = []
                    self._advance(waiters[0][1])
            else:
                woken = [s for count, s in waiters if count <= done]
                if woken:
                    stream.waiters = [(c, s) for c, s in waiters if c > done]
                    for other in woken:
                        self._advance(other)
        if self.outstanding == 0 and self._blocked == "sync":
            self._host_run(self.now, True)

    def _launch_started(self) -> None:
        self.pending_launches -= 1
        if self._blocked == "queue":
            self._host_run(self.now, True)

    # -- device -------------------------------------------------------------------------------------
    def _gap_passed(self, event: Due) -> None:
        self.now = event.at
        self._start(event.payload)
        self._callback_done()

    def _start(self, kernel: _Kernel) -> None:
        now = self.now
        kernel.start = now
        kernel.updated = now
        self.pending_launches -= 1
        if self._blocked == "queue":
            self._host_run(now, True)
        if kernel.remaining <= _EPS:
            self._finish(kernel)
            return
        kernel.rate = 0.0
        if self._placing is not None:
            kernel.placed = placed = self._placing.place([k.placed for k in self.running], kernel.demand,
                                                          kernel.geometry, kernel.library)
            tail = getattr(placed, "tail", None)
            if tail is not None:  # some of its blocks packed for life: it ends no sooner than they do
                kernel.hold = now + tail * kernel.remaining
        self.running.append(kernel)
        self._resolve_rates()

    def _pair_rates(self, a: _Kernel, b: _Kernel) -> tuple[float, float]:
        """The default model's rates for two kernels, remembered per pair of demands."""
        rates = self._pairs[(a.demand_id, b.demand_id)] = self._fluid.pair_rates(a.demand, b.demand)
        return rates

    def _resolve_rates(self) -> None:
        """Re-solve rates; every kernel whose rate changed gets a new completion time (and event id), its
        event pushed when the callback ends (by then its rate may have changed again)."""
        running = self.running
        n = len(running)
        new_id = self.scheduler.new_id
        if self._fluid is None:
            demands = [k.demand for k in running]
            rates = (self._placing.placed_rates(demands, [k.placed for k in running]) if self._placing is not None
                     else self.sharing.rates(demands))
            if len(rates) != n:
                raise ValueError(f"sharing model gave {len(rates)} rates for {n} running kernels")
        elif n == 1:
            rates = (running[0].solo,)
        elif n == 2:
            a, b = running
            rates = self._pairs.get((a.demand_id, b.demand_id)) or self._pair_rates(a, b)
        else:
            rates = self._fluid.rates([k.demand for k in running])
        now = self.now
        # as many rates as kernels (checked above, or by construction); zip's strict= keyword alone costs ~3 %
        # of the engine's instructions per kernel (measured: keyword parsing on every call)
        for k, rate in zip(running, rates):  # noqa: B905
            if rate == k.rate:
                continue
            k.remaining = remaining = k.remaining - k.rate * (now - k.updated)
            k.updated = now
            k.rate = rate
            # max(remaining, 0.0) / rate, added to now as SimPy adds a timeout's delay
            k.at = at = now + (0.0 if remaining < 0.0 else remaining) / rate
            if at < k.floor:
                k.at = k.floor
            k.eid = new_id()
            if not k.queued:
                k.queued = True
                self._due.append(k)

    def _push_due(self) -> None:
        """Push the completion of every kernel whose rate changed; an earlier one it had is superseded."""
        push = self.scheduler.push
        callbacks = self._on_complete
        for k in self._due:
            k.queued = False
            k.event = push(k.at, k.eid, callbacks, k)
        self._due = []

    def _complete(self, event: Due) -> None:
        kernel = event.payload
        if event is not kernel.event:
            return  # superseded: the kernel's rate changed after this completion was pushed
        self.now = event.at
        kernel.event = None  # the event holds the kernel: no cycle left behind
        if kernel.hold > self.now:  # its waiting blocks are done; its packed ones run on, on their own SMs
            self._hold_packed(kernel)
            return
        running = self.running
        running.remove(kernel)
        if running:
            self._resolve_rates()
        self._finish(kernel)
        self._callback_done()

    def _hold_packed(self, kernel: _Kernel) -> None:
        """Keep a kernel whose waiting blocks are done running until its packed blocks end (``hold``), on their
        SMs only (the placing model's ``packed_remainder``)."""
        kernel.floor, kernel.hold = kernel.hold, 0.0
        kernel.placed, kernel.demand = self._placing.packed_remainder(kernel.placed, kernel.demand)
        kernel.remaining, kernel.updated, kernel.rate = 0.0, self.now, -1.0  # -1: its rate is re-solved
        self._resolve_rates()
        self._callback_done()

    def _finish(self, kernel: _Kernel) -> None:
        # _record_run's lines inline: calling it costs ~2 % of the engine's bytecodes per kernel
        now = self.now
        stream = kernel.stream
        start = kernel.start
        self.kernels.append(_tuple_new(KernelRun, (kernel.index, kernel.name, stream.name, start, now,
                                                   kernel.region, kernel.replay)))
        stream.busy_us += now - start
        stream.busy = False
        self._item_done(stream)
        self._advance(stream)

    def _record_run(self, kernel: _Kernel, start: float) -> None:
        now = self.now
        stream = kernel.stream
        self.kernels.append(_tuple_new(KernelRun, (kernel.index, kernel.name, stream.name, start, now,
                                                   kernel.region, kernel.replay)))
        stream.busy_us += now - start


def _not_solved(_demand: Demand) -> float:
    """A kernel's solo rate under a sharing model other than the default (never read)."""
    return 0.0


def _without_gc(function: Callable[..., _T], *args: object) -> _T:
    """Call ``function`` inside :func:`gc_paused` (the engine creates no reference cycles)."""
    with gc_paused():
        return function(*args)


def _host_spans(log: list[float], costs: list[float], indices: list[int], ops: tuple[Op, ...]) -> list[HostSpan]:
    """Lay each logged batch of host calls (``log``: flat triples of issue time, first and end plan entry;
    per plan entry its host cost and op index) end to end from the time it was issued."""
    spans: list[HostSpan] = []
    append = spans.append
    labels: dict[tuple[str, str | None], str] = {}
    for b in range(0, len(log), 3):
        t = log[b]
        for entry in range(int(log[b + 1]), int(log[b + 2])):
            cost = costs[entry]
            if cost > 0:
                fields = ops[indices[entry]].__dict__
                kind = fields["op"]
                key = (kind, fields.get("kernel") or fields.get("graph"))
                label = labels.get(key)
                if label is None:
                    label = labels[key] = f"{kind} {key[1]}" if kind == "launch" or kind == "replay" else kind
                end = t + cost
                append(_tuple_new(HostSpan, (label, t, end)))
                t = end
    return spans


def simulate(program: Program, sharing: SharingModel | None = None) -> SimResult:
    """Run ``program`` and return per-kernel timings, per-stream busy time and the makespan."""
    return Engine(program, sharing).run()
