"""The engine's speed measures keep their promises: the one-pass plan of an eager program is the plan
``expand`` would give, and a run leaves no reference cycles behind (its objects go when its result does)."""

from __future__ import annotations

import gc

from hypothesis import given, settings

from simulator.engine import Engine, PlanEntry, _Kernel, simulate
from simulator.expand import expand
from simulator.ir import parse_program
from simulator.sharing import FluidSharing
from simulator.simpy_adapter import Due
from tests.helpers_programs import launch, program, record, wait
from tests.test_perf_equivalence import documents


def _fields(plan: list[PlanEntry]) -> list[tuple]:
    """Each entry's fields (its kernel's as first set), for comparing plans made by two routes."""
    def kernel(k: _Kernel | None) -> tuple | None:
        return None if k is None else tuple(getattr(k, name) for name in _Kernel.__slots__ if hasattr(k, name))
    return [(e.what, e.host_us, e.index, e.stream, e.event, e.on, kernel(e.kernel)) for e in plan]


@settings(max_examples=150, deadline=None)
@given(documents())
def test_one_pass_plan_is_the_expanded_plan(document):
    """Both routes, on the same engine (so the stream objects in the plans are the same)."""
    eager = parse_program({**document, "ops": [op for op in document["ops"] if not
                                               {"capture_begin", "capture_end", "replay"} & op.keys()]})
    engine = Engine(eager)
    plan, warnings = engine._translate_program()
    expansion = expand(eager)
    assert _fields(plan) == _fields(engine._translate(expansion.issued)[0])
    assert warnings == expansion.warnings


def test_programs_that_capture_graphs_take_the_expanded_plan():
    document = {"streams": {"m": {}, "a": {}}, "ops": [
        {"capture_begin": {"graph": "g", "stream": "m"}}, {"launch": {"kernel": "k", "stream": "m", "dur_us": 1}},
        {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}, {"replay": {"graph": "g"}}]}
    engine = Engine(parse_program(document))
    plan, _ = engine._translate_program()
    assert [(entry.what, entry.index) for entry in plan] == [(5, 3), (0, 1), (5, 4), (0, 1)]  # replay, node, ...


def _engine_objects() -> int:
    return sum(type(o) in (Engine, PlanEntry, _Kernel, Due) for o in gc.get_objects())


def test_a_run_leaves_no_reference_cycles():
    """Shared device (rates re-solved, completions superseded), a device gap, host wake-ups and a full queue:
    with the collector off, dropping the result frees every engine, kernel and event object."""
    p = program([launch("a", "main", 10, bw=0.8), record("e", "main"), launch("b", "aux", 10, bw=0.8),
                 wait("aux", "e"), launch("c", "aux", 3), launch("d", "main", 0)],
                launch_us=1, kernel_gap_us=0.5, queue_depth=1)
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = _engine_objects()
        result = simulate(p, FluidSharing())
        assert len(result.kernels) == 4 and result.host_spans
        del result
        assert _engine_objects() == before
    finally:
        if collecting:
            gc.enable()
