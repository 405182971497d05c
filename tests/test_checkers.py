"""Hazard checker and graph-capture legality on the seed situations and small hand-made programs."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.expand import expand
from simulator.hazards import find_hazards
from simulator.ir import load_program
from tests.helpers_programs import launch, program, record, wait

PROGRAMS = Path(__file__).resolve().parents[1] / "scenarios" / "programs"


def check(path: str):
    p = load_program(PROGRAMS / path)
    e = expand(p)
    return find_hazards(p, e), e.capture_errors


def test_event_pair_schedule_is_clean_and_capturable():
    hazards, errors = check("event_pair_fork_join.yaml")
    assert hazards == [] and errors == []


def test_seed003_lazy_switch_race_and_fix():
    hazards, _ = check("seed003_lazy_switch_race.yaml")
    assert [(h.kind, h.buffer, h.first.kernel, h.second.kernel) for h in hazards] == [
        ("RAW", "input_ids", "all_gather_input_ids", "moe_routing")]
    assert check("seed003_lazy_switch_fixed.yaml") == ([], [])


def test_seed000_alias_race_and_fix():
    hazards, _ = check("seed000_alias_race.yaml")
    assert [(h.kind, h.buffer, h.first.stream, h.second.stream) for h in hazards] == [("WAR", "x", "aux", "main")]
    assert check("seed000_alias_fixed.yaml") == ([], [])


def test_unjoined_fork_is_a_capture_error():
    _, errors = check("capture_unjoined.yaml")
    assert [(e.kind, e.graph, e.stream) for e in errors] == [("unjoined", "g", "aux")]


def test_transitive_join_counts():
    """aux2 joins aux, aux joins main: everything is joined."""
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}}, record("f", "main"), wait("aux", "f"),
           wait("aux2", "f"), launch("b", "aux2", 1), record("j2", "aux2"), wait("aux", "j2"),
           launch("a", "aux", 1), record("j", "aux"), wait("main", "j"), {"capture_end": {"graph": "g"}}]
    p = program(ops, {"main": "nonblocking", "aux": "nonblocking", "aux2": "nonblocking"})
    assert expand(p).capture_errors == []


def test_waiting_on_an_event_recorded_outside_the_capture_is_isolation():
    ops = [launch("a", "aux", 1), record("outside", "aux"), {"capture_begin": {"graph": "g", "stream": "main"}},
           wait("main", "outside"), launch("b", "main", 1), {"capture_end": {"graph": "g"}}]
    errors = expand(program(ops)).capture_errors
    assert [(e.kind, e.stream) for e in errors] == [("isolation", "main")]


def test_sync_inside_capture_is_unsupported():
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}}, {"sync": {}}, {"capture_end": {"graph": "g"}}]
    assert [e.kind for e in expand(program(ops)).capture_errors] == ["unsupported"]


@pytest.mark.parametrize(("kind", "first", "second"), [
    ("RAW", {"writes": ["b"]}, {"reads": ["b"]}),
    ("WAR", {"reads": ["b"]}, {"writes": ["b"]}),
    ("WAW", {"writes": ["b"]}, {"writes": ["b"]}),
])
def test_each_race_kind_and_its_fix(kind, first, second):
    racy = program([launch("k1", "main", 1, **first), launch("k2", "aux", 1, **second)])
    assert [h.kind for h in find_hazards(racy)] == [kind]
    ordered = program([launch("k1", "main", 1, **first), record("e", "main"), wait("aux", "e"),
                       launch("k2", "aux", 1, **second)])
    assert find_hazards(ordered) == []


def test_same_stream_is_ordered_and_sync_orders_everything():
    same = program([launch("k1", "main", 1, writes=["b"]), launch("k2", "main", 1, reads=["b"])])
    assert find_hazards(same) == []
    synced = program([launch("k1", "main", 1, writes=["b"]), {"sync": {}}, launch("k2", "aux", 1, reads=["b"])])
    assert find_hazards(synced) == []


def test_wait_before_the_record_does_not_order():
    """The wait happens before the event is recorded (a no-op), so the read still races."""
    p = program([wait("aux", "e"), launch("k1", "main", 1, writes=["b"]), record("e", "main"),
                 launch("k2", "aux", 1, reads=["b"])])
    assert [h.kind for h in find_hazards(p)] == ["RAW"]


def test_legacy_default_stream_orders_blocking_streams_for_the_checker():
    p = program([launch("k1", "blk", 1, writes=["b"]), launch("k2", "legacy", 1, reads=["b"])],
                {"legacy": "default", "blk": "blocking"})
    assert find_hazards(p) == []
