"""GPU timing primitives: graph chains timed with events, and event-gated spans on several streams."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Call = Callable[[], Any]
GATE_CYCLES = 2_000_000  # ~1 ms of torch.cuda._sleep at ~2 GHz: longer than the host needs to enqueue a lane
STAGGER_CYCLES = 3_000  # ~1.5 µs of sleep (+ its launch) before the later lane of a staggered pair: ~2 µs


def capture(torch: Any, calls: Sequence[Call]) -> Any:
    """A CUDA/HIP graph of ``calls`` issued back to back on the capture stream."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    return g


def replay_times(torch: Any, graphs: Sequence[Any], reps: int) -> list[list[float]]:
    """Event-timed replays (µs), the graphs interleaved rep by rep; one synchronize at the end."""
    evs = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in graphs]
           for _ in range(reps)]
    for row in evs:
        for g, (a, b) in zip(graphs, row, strict=True):
            a.record()
            g.replay()
            b.record()
    torch.cuda.synchronize()
    return [[row[i][0].elapsed_time(row[i][1]) * 1e3 for row in evs] for i in range(len(graphs))]


def gated_spans(torch: Any, gate: Any, lanes: Sequence[tuple[Any, Sequence[Call]]],
                cycles: int = GATE_CYCLES) -> tuple[list[float], bool]:
    """Start every lane (stream, calls) from one event recorded after a sleep kernel on ``gate``, so host
    enqueue time is hidden and lanes start together; returns each lane's span (µs, from the common start to
    its last call's end) and whether the gate held until the host had enqueued everything."""
    start = torch.cuda.Event(enable_timing=True)
    ends = [torch.cuda.Event(enable_timing=True) for _ in lanes]
    with torch.cuda.stream(gate):
        torch.cuda._sleep(cycles)
        start.record(gate)
    for (stream, calls), end in zip(lanes, ends, strict=True):
        stream.wait_event(start)
        with torch.cuda.stream(stream):
            for c in calls:
                c()
        end.record(stream)
    held = not start.query()
    for stream, _ in lanes:
        gate.wait_stream(stream)
    torch.cuda.synchronize()
    return [start.elapsed_time(e) * 1e3 for e in ends], held


def staggered_spans(torch: Any, gate: Any, lanes: Sequence[tuple[Any, Sequence[Call], int]],
                    cycles: int = GATE_CYCLES) -> tuple[list[tuple[float, float]], bool]:
    """Like ``gated_spans``, but each lane (stream, calls, delay cycles) first sleeps its delay on its own
    stream, then records a begin event; returns each lane's (begin, end) in µs from the common start, so the
    device-side offset between lanes is measured, not assumed, and whether the gate held."""
    start = torch.cuda.Event(enable_timing=True)
    marks = []
    with torch.cuda.stream(gate):
        torch.cuda._sleep(cycles)
        start.record(gate)
    for stream, calls, delay in lanes:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream.wait_event(start)
        with torch.cuda.stream(stream):
            if delay:
                torch.cuda._sleep(delay)
            begin.record(stream)
            for c in calls:
                c()
            end.record(stream)
        marks.append((begin, end))
    held = not start.query()
    for stream, _, _ in lanes:
        gate.wait_stream(stream)
    torch.cuda.synchronize()
    return [(start.elapsed_time(b) * 1e3, start.elapsed_time(e) * 1e3) for b, e in marks], held
