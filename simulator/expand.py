"""Unroll a program into what the device actually receives: capture regions are recorded into graphs
instead of running, replays issue a graph's recorded ops at once. Graph-capture legality is checked here,
because only this pass knows which streams take part in a capture.

Captured ops cost no host time (capture is set-up work, outside the timed region); a replay costs the host
``replay_us`` once and its kernel nodes start after ``node_gap_us`` instead of ``kernel_gap_us``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from simulator.ir import (
    HostCosts,
    Launch,
    Op,
    Program,
    Record,
    SetStream,
    Sync,
    Wait,
    WaitStream,
)


class Issued(NamedTuple):
    """One op as the device sees it. ``index``: the op's position in ``program.ops``; ``replay``: which
    replay issued it (None when eager); ``host_us``: host time spent before it takes effect."""

    op: Op
    index: int
    host_us: float
    replay: int | None = None


_tuple_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class CaptureError:
    kind: str  # "unjoined" | "isolation" | "unsupported" | "nested" | "unterminated"
    graph: str
    stream: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "graph": self.graph, "stream": self.stream, "detail": self.detail}


@dataclass(slots=True)
class Expansion:
    issued: list[Issued] = field(default_factory=list)
    capture_errors: list[CaptureError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def default_costs(host: HostCosts) -> dict[str, float]:
    """The program's default host cost of each op kind (capture markers cost nothing)."""
    return {"launch": host.launch_us, "record": host.record_us, "wait": host.wait_us,
            "wait_stream": host.record_us + host.wait_us, "set_stream": host.set_stream_us, "sync": host.sync_us,
            "replay": host.replay_us}


def host_cost(op: Op, host: HostCosts) -> float:
    """The host time of one eager API call: the op's own ``host_us`` or the program's default for its kind."""
    if op.host_us is not None:
        return op.host_us
    return default_costs(host).get(op.op, 0.0)


def never_recorded(index: int, event: str) -> str:
    """The warning for ``ops[index]``, a wait on an event no op recorded before it."""
    return (f"ops[{index}]: wait on event {event!r} that was never recorded "
            "(a no-op, as in CUDA: no ordering is established)")


@dataclass(slots=True)
class _Capture:
    graph: str
    origin: str
    members: set[str]
    events: set[str] = field(default_factory=set)
    clocks: dict[str, dict[str, int]] = field(default_factory=dict)
    ops: list[tuple[int, Op]] = field(default_factory=list)

    def clock(self, stream: str) -> dict[str, int]:
        return self.clocks.setdefault(stream, {})

    def join(self, into: str, source: dict[str, int]) -> None:
        mine = self.clock(into)
        for s, t in source.items():
            if t > mine.get(s, 0):
                mine[s] = t


def expand(program: Program) -> Expansion:
    """Resolve capture/replay and host costs; collect capture-legality errors and warnings."""
    out = Expansion()
    issued = out.issued
    costs = default_costs(program.host)
    graphs: dict[str, list[tuple[int, Op]]] = {}
    recorded: set[str] = set()
    capture: _Capture | None = None
    replays = 0
    for index, op in enumerate(program.ops):
        kind = op.op
        if kind == "capture_begin":
            if capture is not None:
                out.capture_errors.append(CaptureError("nested", op.graph, op.stream,
                                                       f"capture of {capture.graph!r} still open"))
                continue
            capture = _Capture(op.graph, op.stream, {op.stream})
        elif kind == "capture_end":
            if capture is None or capture.graph != op.graph:
                out.capture_errors.append(CaptureError("unsupported", op.graph, "",
                                                       "capture_end without a matching capture_begin"))
                continue
            _check_joined(capture, out)
            graphs[op.graph] = capture.ops
            capture = None
        elif kind == "replay":
            replays += 1
            cost = op.host_us
            issued.append(_tuple_new(Issued, (op, index, costs[kind] if cost is None else cost, replays)))
            issued.extend(_tuple_new(Issued, (node, node_index, 0.0, replays))
                          for node_index, node in graphs[op.graph])
        elif capture is not None and _captured(op, capture, recorded, out):
            capture.ops.append((index, op))
        else:
            if kind == "record":
                recorded.add(op.event)
            elif kind == "wait" and op.event not in recorded:
                out.warnings.append(never_recorded(index, op.event))
            cost = op.host_us
            issued.append(_tuple_new(Issued, (op, index, costs.get(kind, 0.0) if cost is None else cost, None)))
    if capture is not None:
        out.capture_errors.append(CaptureError("unterminated", capture.graph, capture.origin,
                                               "capture_begin without capture_end"))
    return out


def _captured(op: Op, cap: _Capture, recorded: set[str], out: Expansion) -> bool:
    """Apply an op issued while a capture is open; True if it belongs to the graph."""
    if isinstance(op, Sync):
        out.capture_errors.append(CaptureError("unsupported", cap.graph, "", "device synchronize during capture"))
        return False
    if isinstance(op, SetStream):
        return False
    if isinstance(op, Launch):
        if op.stream not in cap.members:
            return False
        clock = cap.clock(op.stream)
        clock[op.stream] = clock.get(op.stream, 0) + 1
        return True
    if isinstance(op, Record):
        if op.stream not in cap.members:
            cap.events.discard(op.event)
            recorded.add(op.event)
            return False
        cap.events.add(op.event)
        recorded.add(op.event)
        cap.clocks[f"event:{op.event}"] = dict(cap.clock(op.stream))
        return True
    if isinstance(op, Wait):
        if op.event in cap.events:
            cap.members.add(op.stream)
            cap.join(op.stream, cap.clocks[f"event:{op.event}"])
            return True
        if op.stream in cap.members and op.event in recorded:
            out.capture_errors.append(CaptureError(
                "isolation", cap.graph, op.stream,
                f"waits on event {op.event!r} recorded outside the capture"))
        return False
    if isinstance(op, WaitStream):
        if op.on in cap.members:
            cap.members.add(op.stream)
            cap.join(op.stream, cap.clock(op.on))
            return True
        if op.stream in cap.members:
            out.capture_errors.append(CaptureError(
                "isolation", cap.graph, op.stream, f"waits on stream {op.on!r}, which is not in the capture"))
        return False
    return False


def _check_joined(cap: _Capture, out: Expansion) -> None:
    origin = cap.clock(cap.origin)
    for stream in sorted(cap.members - {cap.origin}):
        issued = cap.clock(stream).get(stream, 0)
        if issued > origin.get(stream, 0):
            out.capture_errors.append(CaptureError(
                "unjoined", cap.graph, stream,
                f"stream {stream!r} was forked into the capture and not joined back into {cap.origin!r}"))
