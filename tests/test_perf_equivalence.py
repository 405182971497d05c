"""The fast paths against slow references: the engine against the engine as first written (kept below,
verbatim, as the oracle) on random programs, exact equality of every output; the fast parse path against
pydantic's full validation (same models, same field sets, same errors)."""

from __future__ import annotations

from collections import deque

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.engine import simulate
from simulator.errors import InputError, describe_validation_error
from simulator.expand import Issued, expand
from simulator.ir import Launch, Program, parse_program
from simulator.result import FlowArrow, HostSpan, KernelRun, SimResult
from simulator.sharing import FluidSharing, SharingModel

# ---- reference engine (the original simulator/engine.py at commit 050eb27, unchanged) ------------------

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
        gap = host.node_gap_us if item.replay is not None else host.kernel_gap_us
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


# ---- random programs ----------------------------------------------------------------------------------

STREAMS = ("s0", "s1", "s2", "s3")
durations = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.5, 10.0]) | st.floats(0.0, 20.0, allow_nan=False)
fractions = st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 1.0]) | st.floats(0.0, 1.0)
costs = st.sampled_from([0.0, 0.0, 0.2, 0.5, 1.0, 3.0])


@st.composite
def documents(draw) -> dict:
    """Programs mixing every op kind the engine handles (captures included), all stream kinds, host costs,
    device gaps, small queue depths and optional per-op host costs."""
    kinds = draw(st.lists(st.sampled_from(["default", "blocking", "nonblocking"]), min_size=4, max_size=4))
    ops: list[dict] = []

    def op(name: str, **body) -> dict:
        if draw(st.integers(0, 5)) == 0:
            body["host_us"] = draw(costs)
        return {name: body}

    def plain(i: int) -> dict:
        choice = draw(st.sampled_from(["launch"] * 4 + ["record", "wait", "wait_stream", "set_stream", "sync"]))
        stream = draw(st.sampled_from(STREAMS))
        if choice == "launch":
            return op("launch", kernel=f"k{i}", stream=stream, dur_us=draw(durations), sm=draw(fractions),
                      bw=draw(fractions), tc=draw(fractions))
        if choice in ("record", "wait"):
            return op(choice, stream=stream, event=f"e{draw(st.integers(0, 3))}")
        if choice == "wait_stream":
            return op("wait_stream", stream=stream, on=draw(st.sampled_from(STREAMS)))
        if choice == "set_stream":
            return op("set_stream", stream=stream)
        return op("sync")

    for i in range(draw(st.integers(1, 40))):
        ops.append(plain(i))
    if draw(st.booleans()):  # a graph: fork s1 off s0, join back, replayed a few times
        ops += [{"capture_begin": {"graph": "g", "stream": "s0"}},
                {"launch": {"kernel": "ga", "stream": "s0", "dur_us": draw(durations), "bw": draw(fractions)}},
                {"record": {"event": "gf", "stream": "s0"}}, {"wait": {"stream": "s1", "event": "gf"}},
                {"launch": {"kernel": "gb", "stream": "s1", "dur_us": draw(durations), "bw": draw(fractions)}},
                {"record": {"event": "gj", "stream": "s1"}}, {"wait": {"stream": "s0", "event": "gj"}},
                {"capture_end": {"graph": "g"}}]
        for i in range(draw(st.integers(1, 3))):
            ops.append({"replay": {"graph": "g"}})
            ops.append(plain(100 + i))
    host = {key: draw(costs) for key in ("launch_us", "record_us", "wait_us", "set_stream_us", "sync_us",
                                         "replay_us", "node_gap_us", "kernel_gap_us")}
    host["queue_depth"] = draw(st.sampled_from([1, 2, 3, 1024]))
    return {"streams": {s: {"kind": k} for s, k in zip(STREAMS, kinds, strict=True)}, "host": host, "ops": ops}


sharings = st.builds(FluidSharing, sm_capacity=st.sampled_from([1.0, 0.8]), bw_capacity=st.sampled_from([1.0, 0.6]),
                     tc_capacity=st.sampled_from([1.0, 0.9]), overlap_penalty=st.sampled_from([0.0, 0.1]))


class _Proportional:
    """A sharing model that is not FluidSharing (exercises the generic path): every kernel gets 1/n."""

    def rates(self, demands):
        return [1.0 / len(demands)] * len(demands)


def _same(program: Program, sharing) -> None:
    fast, slow = simulate(program, sharing), ReferenceEngine(program, sharing).run()
    assert fast.kernels == slow.kernels
    assert fast.makespan_us == slow.makespan_us and fast.host_end_us == slow.host_end_us
    assert fast.streams == slow.streams
    assert fast.host_spans == slow.host_spans
    assert fast.flows == slow.flows
    assert fast.warnings == slow.warnings


@settings(max_examples=300, deadline=None)
@given(documents(), sharings)
def test_engine_matches_reference_exactly(document, sharing):
    program = parse_program(document)
    if expand(program).capture_errors:
        return
    _same(program, sharing)


@settings(max_examples=50, deadline=None)
@given(documents())
def test_engine_matches_reference_with_another_sharing_model(document):
    program = parse_program(document)
    if not expand(program).capture_errors:
        _same(program, _Proportional())


def test_engine_matches_reference_on_the_benchmark_program():
    from benchmarks.engine_speed import fork_join_program

    _same(parse_program(fork_join_program(300)), None)


@st.composite
def pipelines(draw) -> dict:
    """Long programs where the host runs ahead of the device: many launches on few busy streams joined by
    events, durations and host costs on a coarse grid (so events often fall at the same time), rare syncs."""
    grid = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
    streams = ("s0", "s1", "s2")
    kinds = draw(st.lists(st.sampled_from(["default", "blocking", "nonblocking"]), min_size=3, max_size=3))
    ops: list[dict] = []
    for i in range(draw(st.integers(20, 150))):
        choice = draw(st.sampled_from(["launch"] * 6 + ["record", "record", "wait", "wait", "wait_stream", "sync"]))
        stream = draw(st.sampled_from(streams))
        if choice == "launch":
            body = {"kernel": f"k{i}", "stream": stream, "dur_us": draw(grid), "sm": draw(fractions),
                    "bw": draw(fractions)}
        elif choice in ("record", "wait"):
            body = {"stream": stream, "event": f"e{draw(st.integers(0, 2))}"}
        elif choice == "wait_stream":
            body = {"stream": stream, "on": draw(st.sampled_from(streams))}
        else:
            body = {}
        if draw(st.integers(0, 7)) == 0:
            body["host_us"] = draw(grid)
        ops.append({choice: body})
    host = {key: draw(st.sampled_from([0.0, 0.25, 0.5, 1.0])) for key in ("launch_us", "record_us", "wait_us",
                                                                         "sync_us", "kernel_gap_us")}
    host["queue_depth"] = draw(st.sampled_from([1, 2, 4, 8, 1024]))
    return {"streams": {s: {"kind": k} for s, k in zip(streams, kinds, strict=True)}, "host": host, "ops": ops}


@settings(max_examples=150, deadline=None)
@given(pipelines(), sharings)
def test_engine_matches_reference_when_the_host_runs_ahead(document, sharing):
    _same(parse_program(document), sharing)


def test_host_wake_tied_with_a_device_gap_keeps_the_host_first():
    """k7 starts at 0.25 (gap) and wakes the host, which issues k11 and asks to wake at 0.5 (wait 0.25);
    k7 then ends and k11's gap is scheduled for 0.5 too. The host asked first, so at 0.5 it finds k11 not
    started (queue depth 1) and blocks; k11's start lets it launch k14 on the blocking stream, whose implicit
    wait on the default stream covers k11 (done at 0.5): one legacy flow. In the other order k11 would be
    done before k14 is issued and there would be no flow."""
    document = {"streams": {"s0": {"kind": "default"}, "s1": {"kind": "blocking"}},
                "host": {"wait_us": 0.25, "kernel_gap_us": 0.25, "queue_depth": 1},
                "ops": [{"launch": {"kernel": "k7", "stream": "s0", "dur_us": 0.0}},
                        {"launch": {"kernel": "k11", "stream": "s0", "dur_us": 0.0}},
                        {"wait": {"stream": "s0", "event": "e0"}},
                        {"launch": {"kernel": "k14", "stream": "s1", "dur_us": 0.0}}]}
    program = parse_program(document)
    _same(program, None)
    assert simulate(program).flows == [FlowArrow("legacy-default-sync", "s0", 0.5, "s1", 0.5)]


# ---- parse fast path ----------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(documents())
def test_fast_parse_builds_what_pydantic_builds(document):
    fast, slow = parse_program(document), Program.model_validate(document)
    assert fast == slow
    assert fast.model_fields_set == slow.model_fields_set
    for a, b in zip(fast.ops, slow.ops, strict=True):
        assert type(a) is type(b) and a.model_fields_set == b.model_fields_set
        assert list(a.__dict__.items()) == list(b.__dict__.items())
    assert fast.to_dict() == slow.to_dict()


def test_fast_parse_converts_ints_and_lists_like_pydantic():
    doc = {"streams": {"m": {}}, "ops": [{"launch": {"kernel": "k", "stream": "m", "dur_us": 3, "sm": 1,
                                                     "reads": ["x"], "host_us": 0}}]}
    op = parse_program(doc).ops[0]
    assert isinstance(op, Launch) and type(op.dur_us) is float and type(op.sm) is float and op.reads == ("x",)
    assert op == Program.model_validate(doc).ops[0]


@pytest.mark.parametrize(("op", "where"), [
    ({"launch": {"kernel": "k", "stream": "m", "dur_us": -1}}, "ops[1].launch.dur_us"),
    ({"launch": {"kernel": "k", "stream": "m", "dur_us": "3"}}, None),  # pydantic's lax mode accepts "3"
    ({"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "sm": 1.5}}, "ops[1].launch.sm"),
    ({"launch": {"kernel": "", "stream": "m", "dur_us": 1}}, "ops[1].launch.kernel"),
    ({"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "speed": 2}}, "ops[1].launch.speed"),
    ({"launch": {"kernel": "k", "stream": "m"}}, "ops[1].launch.dur_us"),
    ({"launch": {"kernel": "k", "stream": "x", "dur_us": 1}}, "undeclared stream 'x'"),
    ({"record": {"event": "e", "stream": "m", "host_us": True}}, None),
    ({"lunch": {"kernel": "k"}}, "ops[1]"),
    ({"replay": {"graph": "g"}}, "never captured"),
])
def test_fast_parse_leaves_the_verdict_and_the_wording_to_pydantic(op, where):
    doc = {"streams": {"m": {}}, "ops": [{"sync": None}, op]}
    try:
        expected = Program.model_validate(doc)
    except ValidationError as err:
        message = describe_validation_error(err, "src")
        with pytest.raises(InputError) as raised:
            parse_program(doc, "src")
        assert str(raised.value) == message and where in message
    else:
        assert where is None and parse_program(doc, "src") == expected


@pytest.mark.parametrize("op", [
    {"launch": {"kernel": "k", "stream": "m", "dur_us": True}},  # a bool is not a duration
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "bw": False}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 2**60}},  # an int too large to convert exactly
    {"launch": {"kernel": "k", "stream": "m", "dur_us": float("nan")}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": float("inf")}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": -0.0, "tc": 1}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "sm": None}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "host_us": None, "family": None, "region": "r"}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "host_us": -1}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "family": 3}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "reads": [], "writes": ("y",)}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "reads": "x"}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "writes": [1]}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "op": "launch"}},
    {"launch": {"kernel": 7, "stream": "m", "dur_us": 1}},
    {"launch": {"kernel": "k", "dur_us": 1}},
    {"launch": None},
    {"record": {"event": "e", "stream": "m", "host_us": 2}},
    {"record": {"event": "", "stream": "m"}},
    {"record": {"event": "e"}},
    {"record": None},
    {"record": {"event": "e", "stream": "m", "kernel": "k"}},
    {"wait": {"event": 1, "stream": "m"}},
    {"wait_stream": {"stream": "m", True: "m"}},  # YAML 1.1's reading of a bare ``on:`` key
    {"wait_stream": {"stream": "m", 1: "m"}},
    {"wait_stream": {"stream": "m", "on": "x"}},
    {"set_stream": {"stream": "m", "host_us": 0.5}},
    {"sync": {"host_us": 1}},
    {"sync": {"stream": "m"}},
    {"capture_end": {"graph": ""}},
    {"replay": {"graph": "g", "host_us": 1}},
])
def test_fast_parse_agrees_with_pydantic_op_by_op(op):
    """Each converted or rejected field, next to an op of every kind the fast path builds."""
    doc = {"streams": {"m": {"kind": "blocking"}},
           "ops": [{"sync": None}, {"capture_begin": {"graph": "g", "stream": "m"}}, {"capture_end": {"graph": "g"}},
                   op, {"launch": {"kernel": "k", "stream": "m", "dur_us": 1.5, "sm": 0.5}}]}
    try:
        expected = Program.model_validate(doc)
    except ValidationError as err:
        with pytest.raises(InputError) as raised:
            parse_program(doc, "src")
        assert str(raised.value) == describe_validation_error(err, "src")
        return
    fast = parse_program(doc)
    assert fast == expected and fast.model_fields_set == expected.model_fields_set
    for a, b in zip(fast.ops, expected.ops, strict=True):
        assert type(a) is type(b) and a.model_fields_set == b.model_fields_set
        assert [(k, type(v), v) for k, v in a.__dict__.items()] == [(k, type(v), v) for k, v in b.__dict__.items()]


def test_fast_parse_takes_every_op_kind():
    """The fast path is not silently bypassed: a well-formed program of every op kind needs no fallback."""
    from simulator.ir import _fast_program

    doc = {"streams": {"m": {}, "a": {}}, "ops": [
        {"launch": {"kernel": "k", "stream": "m", "dur_us": 1}}, {"record": {"event": "e", "stream": "m"}},
        {"wait": {"stream": "a", "event": "e"}}, {"wait_stream": {"stream": "m", "on": "a"}},
        {"set_stream": {"stream": "a"}}, {"sync": {}}, {"capture_begin": {"graph": "g", "stream": "m"}},
        {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}]}
    assert _fast_program(doc) == Program.model_validate(doc)
