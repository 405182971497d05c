"""ProgramBuilder: host-order ops, current stream, capture wrapper, errors."""

from __future__ import annotations

import pytest

from simulator.cost import KernelSpec
from simulator.engine import simulate
from simulator.errors import InputError
from simulator.ir import CaptureBegin, CaptureEnd, Launch, Replay, SetStream, WaitStream
from simulator.workloads.builder import ProgramBuilder


def _k(name: str, dur: float = 10.0) -> Launch:
    return Launch(kernel=name, stream="main", dur_us=dur)


def test_current_stream_and_using() -> None:
    b = ProgramBuilder()
    b.stream("aux")
    b.launch(_k("a"))
    with b.using("aux"):
        b.wait_stream("main")
        b.launch(_k("b"))
    b.launch(_k("c"))
    prog = b.build()
    assert [(op.kernel, op.stream) for op in prog.kernels()] == [("a", "main"), ("b", "aux"), ("c", "main")]
    assert prog.ops[1] == SetStream(stream="aux") and prog.ops[-2] == SetStream(stream="main")
    assert WaitStream(stream="aux", on="main") in prog.ops
    # b waits for a on main: a (10) then b (10); c runs on main right after a, concurrently with b
    res = simulate(prog)
    ends = {k.name: k.end_us for k in res.kernels}
    assert ends["b"] >= ends["a"] + 10 - 1e-9


def test_capture_and_replay() -> None:
    b = ProgramBuilder()
    with b.capture("g"):
        b.launch(_k("a"))
        b.launch(_k("b"))
    b.replay("g")
    b.replay("g")
    prog = b.build()
    assert isinstance(prog.ops[0], CaptureBegin) and isinstance(prog.ops[3], CaptureEnd)
    assert [type(op) for op in prog.ops[4:]] == [Replay, Replay]
    assert len([k for k in simulate(prog).kernels]) == 4  # two replays of two kernels, capture runs none


def test_errors_and_names() -> None:
    b = ProgramBuilder()
    with pytest.raises(InputError, match="undeclared stream"):
        b.launch(_k("a"), "side")
    with pytest.raises(InputError, match="no cost model"):
        b.launch(KernelSpec("k", "gemm", flops=1.0))
    b.stream("side", "blocking")
    with pytest.raises(InputError, match="already declared"):
        b.stream("side", "nonblocking")
    with pytest.raises(InputError, match="inside capture"), b.capture("g"), b.capture("h"):
        pass
    assert [b.fresh("ev"), b.fresh("ev"), b.fresh("x")] == ["ev", "ev#1", "x"]


def test_region_tags_launches() -> None:
    b = ProgramBuilder()
    with b.in_region("moe.shared_experts"):
        b.launch(_k("a"))
    b.launch(_k("b"))
    assert [op.region for op in b.build().kernels()] == ["moe.shared_experts", None]
