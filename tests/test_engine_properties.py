"""Property-based tests: dependencies respected, makespan between critical path and serial sum, determinism."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine import simulate
from simulator.ir import parse_program

STREAMS = ("s0", "s1", "s2")


@st.composite
def programs(draw):
    """Random launch/record/wait programs on three non-blocking streams, no host costs."""
    ops = []
    n = draw(st.integers(1, 30))
    for i in range(n):
        choice = draw(st.sampled_from(["launch", "launch", "record", "wait"]))
        stream = draw(st.sampled_from(STREAMS))
        if choice == "launch":
            ops.append({"launch": {"kernel": f"k{i}", "stream": stream,
                                   "dur_us": draw(st.floats(0.0, 50.0, allow_nan=False)),
                                   "sm": draw(st.floats(0.0, 1.0)), "bw": draw(st.floats(0.0, 1.0)),
                                   "tc": draw(st.floats(0.0, 1.0))}})
        elif choice == "record":
            ops.append({"record": {"event": f"e{draw(st.integers(0, 3))}", "stream": stream}})
        else:
            ops.append({"wait": {"stream": stream, "event": f"e{draw(st.integers(0, 3))}"}})
    return parse_program({"streams": {s: {} for s in STREAMS}, "ops": ops})


def dependencies(program) -> dict[int, set[int]]:
    """Oracle, independent of the engine: op index of each launch -> op indices of the launches it must
    follow (previous launch on its stream; for each wait queued before it, the last launch on the event's
    stream at record time)."""
    last_on: dict[str, int | None] = dict.fromkeys(STREAMS)
    events: dict[str, int | None] = {}
    pending: dict[str, set[int]] = {s: set() for s in STREAMS}
    deps: dict[int, set[int]] = {}
    for index, op in enumerate(program.ops):
        if op.op == "launch":
            d = set(pending[op.stream])
            if last_on[op.stream] is not None:
                d.add(last_on[op.stream])
            deps[index] = d
            pending[op.stream] = set()
            last_on[op.stream] = index
        elif op.op == "record":
            events[op.event] = last_on[op.stream]
        elif op.op == "wait" and events.get(op.event) is not None:
            pending[op.stream].add(events[op.event])
    return deps


@settings(max_examples=150, deadline=None)
@given(programs())
def test_no_kernel_starts_before_its_dependencies(program):
    result = simulate(program)
    by_index = {k.index: k for k in result.kernels}
    for index, deps in dependencies(program).items():
        for dep in deps:
            assert by_index[index].start_us >= by_index[dep].end_us - 1e-9


@settings(max_examples=150, deadline=None)
@given(programs())
def test_makespan_between_critical_path_and_serial_sum(program):
    result = simulate(program)
    durations = {i: op.dur_us for i, op in enumerate(program.ops) if op.op == "launch"}
    finish: dict[int, float] = {}
    for index, deps in sorted(dependencies(program).items()):
        finish[index] = max((finish[d] for d in deps), default=0.0) + durations[index]
    critical = max(finish.values(), default=0.0)
    serial = sum(durations.values())
    assert critical - 1e-6 <= result.makespan_us <= serial + 1e-6


@settings(max_examples=50, deadline=None)
@given(programs())
def test_results_are_deterministic(program):
    first = json.dumps(simulate(program).to_json_dict())
    assert json.dumps(simulate(program).to_json_dict()) == first
