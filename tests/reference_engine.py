"""The engine as first written and tested (before the speed work): the original simulator/engine.py at commit
050eb27, unchanged, kept as the oracle the fast engine is compared with (tests/test_perf_equivalence.py).
It uses only SimPy's public API."""

from __future__ import annotations

from collections import deque

import simpy

from simulator.expand import Issued, expand
from simulator.ir import Launch, Program
from simulator.result import FlowArrow, HostSpan, KernelRun, SimResult
from simulator.sharing import FluidSharing, SharingModel

_EPS = 1e-9


class _Kernel:
    __slots__ = ("demand", "dur", "gap", "index", "launch", "rate", "remaining", "replay", "start", "stream",
                 "updated", "version")

    def __init__(self, launch: Launch, index: int, stream: _Stream, gap: float, replay: int | None) -> None:
        self.launch = launch
        self.index = index
        self.stream = stream
        self.gap = gap
        self.replay = replay
        self.dur = launch.dur_us
        self.demand = (launch.sm, launch.bw, launch.tc)
        self.remaining = launch.dur_us
        self.rate = 1.0
        self.start = 0.0
        self.updated = 0.0
        self.version = 0


class _WaitItem:
    __slots__ = ("count", "event", "target")

    def __init__(self, target: _Stream, count: int, event: str) -> None:
        self.target = target
        self.count = count
        self.event = event


class _Stream:
    __slots__ = ("busy", "busy_us", "done", "done_times", "enqueued", "kind", "name", "queue", "waiters")

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


class ReferenceEngine:
    """The engine as first written and tested (before the speed work), kept verbatim as the oracle."""

    def __init__(self, program: Program, sharing: SharingModel | None = None) -> None:
        self.program = program
        self.sharing = sharing or FluidSharing()
        self.env = simpy.Environment()
        self.streams = {name: _Stream(name, spec.kind) for name, spec in program.streams.items()}
        self.blocking = [s for s in self.streams.values() if s.kind == "blocking"]
        self.default = [s for s in self.streams.values() if s.kind == "default"]
        self.events: dict[str, tuple[_Stream, int]] = {}
        self.running: list[_Kernel] = []
        self.outstanding = 0
        self.pending_launches = 0
        self.kernels: list[KernelRun] = []
        self._host_log: list[tuple[float, list[Issued], Issued | None]] = []
        self.flows: list[FlowArrow] = []
        self.host_end = 0.0
        self._issued: list[Issued] = []
        self._next = 0
        self._held: list[Issued] = []
        self._held_cost = 0.0
        self._paid = False
        self._blocked: str | None = None

    def run(self) -> SimResult:
        expansion = expand(self.program)
        self._issued = expansion.issued
        self._host_step()
        self.env.run()
        stuck = [s.name for s in self.streams.values() if s.queue]
        if stuck or self._next < len(self._issued):
            raise RuntimeError(f"simulation stalled; streams with queued work: {stuck}")
        self.kernels.sort(key=lambda k: (k.start_us, k.end_us, k.index))
        return SimResult(
            makespan_us=max((k.end_us for k in self.kernels), default=0.0),
            host_end_us=self.host_end,
            kernels=self.kernels,
            streams={name: s.busy_us for name, s in self.streams.items()},
            host_spans=_host_spans(self._host_log),
            flows=self.flows,
            warnings=expansion.warnings,
        )

    # -- host ---------------------------------------------------------------------------------------
    def _host_step(self, _event: object = None) -> None:
        """Issue ops until the host must spend time (before a launch or sync) or block (sync, full queue)."""
        issued = self._issued
        depth = self.program.host.queue_depth
        self._blocked = None
        while self._next < len(issued):
            item = issued[self._next]
            kind = item.op.op
            if kind != "launch" and kind != "sync":
                self._held.append(item)
                self._held_cost += item.host_us
                self._next += 1
                continue
            if not self._paid:
                self._paid = True
                delay = self._held_cost + item.host_us
                if delay > 0:
                    self._add_host_spans(item)
                    self.env.timeout(delay).callbacks.append(self._host_step)
                    return
            if kind == "launch" and self.pending_launches >= depth:
                self._blocked = "queue"
                return
            self._apply_held()
            self._next += 1
            self._paid = False
            if kind == "launch":
                self._launch(item)
            elif self.outstanding:
                self._blocked = "sync"
                return
        tail = self._held_cost
        if tail > 0:
            self._add_host_spans(None)
        self._apply_held()
        if tail > 0:
            self.env.timeout(tail).callbacks.append(self._host_finish)
        else:
            self.host_end = self.env.now

    def _host_finish(self, _event: object) -> None:
        self.host_end = self.env.now

    def _add_host_spans(self, item: Issued | None) -> None:
        """Log the held ops and ``item`` as host work starting now (turned into spans after the run)."""
        self._host_log.append((self.env.now, self._held, item))

    def _apply_held(self) -> None:
        """Apply the records, waits and stream switches issued since the last launch, in host order."""
        for item in self._held:
            op = item.op
            kind = op.op
            if kind == "record":
                stream = self.streams[op.stream]
                self.events[op.event] = (stream, stream.enqueued)
            elif kind == "wait":
                snapshot = self.events.get(op.event)
                if snapshot is not None:
                    self._wait(self.streams[op.stream], snapshot[0], snapshot[1], op.event)
            elif kind == "wait_stream":
                on = self.streams[op.on]
                self._wait(self.streams[op.stream], on, on.enqueued, f"wait_stream:{op.on}")
        self._held = []
        self._held_cost = 0.0

    def _launch(self, item: Issued) -> None:
        op = item.op
        stream = self.streams[op.stream]
        if stream.kind == "default":
            for other in self.blocking:
                self._wait(stream, other, other.enqueued, "legacy-default-sync")
        elif stream.kind == "blocking":
            for other in self.default:
                self._wait(stream, other, other.enqueued, "legacy-default-sync")
        host = self.program.host
        gap = (host.node_gap_us if item.replay is not None else host.kernel_gap_us) * op.kernels
        self.pending_launches += 1
        self._enqueue(stream, _Kernel(op, item.index, stream, gap, item.replay))

    def _wait(self, stream: _Stream, target: _Stream, count: int, event: str) -> None:
        if target is stream or target.done >= count:
            return
        self._enqueue(stream, _WaitItem(target, count, event))

    def _enqueue(self, stream: _Stream, item: _Kernel | _WaitItem) -> None:
        stream.queue.append(item)
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
                if target.done < head.count:
                    target.waiters.append((head.count, stream))
                    return
                queue.popleft()
                ready = target.done_times[head.count - 1]
                self.flows.append(FlowArrow(head.event, target.name, ready, stream.name, self.env.now))
                self._item_done(stream)
                continue
            queue.popleft()
            if head.gap <= 0 and head.remaining <= _EPS:
                self._launch_started()
                self._record_run(head, self.env.now)
                self._item_done(stream)
                continue
            stream.busy = True
            if head.gap > 0:
                self.env.timeout(head.gap).callbacks.append(lambda _e, k=head: self._start(k))
            else:
                self._start(head)

    def _item_done(self, stream: _Stream) -> None:
        stream.done += 1
        stream.done_times.append(self.env.now)
        self.outstanding -= 1
        if stream.waiters:
            done = stream.done
            woken = [s for count, s in stream.waiters if count <= done]
            if woken:
                stream.waiters = [(c, s) for c, s in stream.waiters if c > done]
                for other in woken:
                    self._advance(other)
        if self.outstanding == 0 and self._blocked == "sync":
            self._host_step()

    def _launch_started(self) -> None:
        self.pending_launches -= 1
        if self._blocked == "queue":
            self._host_step()

    # -- device -------------------------------------------------------------------------------------
    def _start(self, kernel: _Kernel) -> None:
        now = self.env.now
        kernel.start = now
        kernel.updated = now
        self._launch_started()
        if kernel.remaining <= _EPS:
            self._finish(kernel)
            return
        kernel.rate = 0.0
        self.running.append(kernel)
        self._resolve_rates()

    def _resolve_rates(self) -> None:
        """Re-solve rates; reschedule the completion of every kernel whose rate changed."""
        running = self.running
        if not running:
            return
        rates = self.sharing.rates([k.demand for k in running])
        now = self.env.now
        for k, rate in zip(running, rates, strict=True):
            if rate == k.rate:
                continue
            k.remaining -= k.rate * (now - k.updated)
            k.updated = now
            k.rate = rate
            k.version += 1
            self.env.timeout(max(k.remaining, 0.0) / rate).callbacks.append(
                lambda _e, k=k, v=k.version: self._complete(k, v))

    def _complete(self, kernel: _Kernel, version: int) -> None:
        if version != kernel.version:
            return
        self.running.remove(kernel)
        self._resolve_rates()
        self._finish(kernel)

    def _finish(self, kernel: _Kernel) -> None:
        stream = kernel.stream
        self._record_run(kernel, kernel.start)
        stream.busy = False
        self._item_done(stream)
        self._advance(stream)

    def _record_run(self, kernel: _Kernel, start: float) -> None:
        now = self.env.now
        op = kernel.launch
        self.kernels.append(KernelRun(kernel.index, op.kernel, op.stream, start, now, op.region, kernel.replay))
        kernel.stream.busy_us += now - start


def _host_spans(log: list[tuple[float, list[Issued], Issued | None]]) -> list[HostSpan]:
    """Lay each logged batch of host calls end to end from the time it was issued."""
    spans = []
    for start, held, item in log:
        t = start
        for issued in [*held, item] if item is not None else held:
            if issued.host_us > 0:
                spans.append(HostSpan(_host_label(issued), t, t + issued.host_us))
                t += issued.host_us
    return spans


def _host_label(item: Issued) -> str:
    op = item.op
    if op.op == "launch":
        return f"launch {op.kernel}"
    if op.op == "replay":
        return f"replay {op.graph}"
    return op.op
