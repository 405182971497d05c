"""The fast paths against slow references: the engine against the engine as first written
(tests/reference_engine.py, kept verbatim as the oracle) on random programs, exact equality of every output;
the fast parse path against pydantic's full validation (same models, same field sets, same errors)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.engine import simulate
from simulator.errors import InputError, describe_validation_error
from simulator.expand import expand
from simulator.ir import Launch, Program, parse_program
from simulator.result import FlowArrow
from simulator.sharing import FluidSharing
from tests.reference_engine import ReferenceEngine

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
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "kernels": 3}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "kernels": 0}},
    {"launch": {"kernel": "k", "stream": "m", "dur_us": 1, "kernels": 2.0}},  # pydantic's lax mode takes 2.0
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
