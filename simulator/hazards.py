"""Happens-before race detection over kernels' buffer reads and writes, with vector clocks per stream, the way
PyTorch's CUDA sanitizer does it: a launch ticks its stream's clock, ``record`` copies the stream's clock into
the event, ``wait`` joins the event's clock into the stream, ``sync`` joins everything (the host saw it all
finish). The legacy default stream joins the blocking streams' clocks at each launch and they join its.

An access races with an earlier one on the same buffer from another stream when the accessing stream's clock
has not seen the earlier kernel's tick: read-after-write (RAW), write-after-read (WAR), write-after-write
(WAW). Replays are checked as executed (a graph's ops each time it is replayed).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.expand import Expansion, expand
from simulator.ir import Program


@dataclass(frozen=True, slots=True)
class Access:
    kernel: str
    stream: str
    tick: int
    index: int


@dataclass(frozen=True, slots=True)
class Hazard:
    kind: str  # RAW | WAR | WAW
    buffer: str
    first: Access
    second: Access

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "buffer": self.buffer,
            "first": {"kernel": self.first.kernel, "stream": self.first.stream, "op_index": self.first.index},
            "second": {"kernel": self.second.kernel, "stream": self.second.stream,
                       "op_index": self.second.index},
        }

    def describe(self) -> str:
        return (f"{self.kind} race on {self.buffer!r}: {self.second.kernel} on {self.second.stream} "
                f"(ops[{self.second.index}]) is unordered with {self.first.kernel} on {self.first.stream} "
                f"(ops[{self.first.index}])")


Clock = dict[str, int]


def _join(into: Clock, other: Clock) -> None:
    for stream, tick in other.items():
        if tick > into.get(stream, 0):
            into[stream] = tick


def find_hazards(program: Program, expansion: Expansion | None = None) -> list[Hazard]:
    """All distinct races (by kind, buffer, kernels and streams), in the order they are first met."""
    expansion = expansion or expand(program)
    kinds = {name: spec.kind for name, spec in program.streams.items()}
    clocks: dict[str, Clock] = {name: {} for name in program.streams}
    events: dict[str, Clock] = {}
    last_write: dict[str, Access] = {}
    reads: dict[str, dict[str, Access]] = {}
    found: dict[tuple, Hazard] = {}

    def ordered(clock: Clock, earlier: Access) -> bool:
        return clock.get(earlier.stream, 0) >= earlier.tick

    def report(kind: str, buffer: str, first: Access, second: Access) -> None:
        key = (kind, buffer, first.kernel, first.stream, second.kernel, second.stream)
        found.setdefault(key, Hazard(kind, buffer, first, second))

    for item in expansion.issued:
        op = item.op
        kind = op.op
        if kind == "launch":
            stream = op.stream
            clock = clocks[stream]
            if kinds[stream] == "default":
                for other, k in kinds.items():
                    if k == "blocking":
                        _join(clock, clocks[other])
            elif kinds[stream] == "blocking":
                for other, k in kinds.items():
                    if k == "default":
                        _join(clock, clocks[other])
            clock[stream] = clock.get(stream, 0) + 1
            me = Access(op.kernel, stream, clock[stream], item.index)
            for buffer in op.reads:
                writer = last_write.get(buffer)
                if writer is not None and writer.stream != stream and not ordered(clock, writer):
                    report("RAW", buffer, writer, me)
            for buffer in op.writes:
                writer = last_write.get(buffer)
                if writer is not None and writer.stream != stream and not ordered(clock, writer):
                    report("WAW", buffer, writer, me)
                for reader in reads.get(buffer, {}).values():
                    if reader.stream != stream and not ordered(clock, reader):
                        report("WAR", buffer, reader, me)
            for buffer in op.reads:
                reads.setdefault(buffer, {})[stream] = me
            for buffer in op.writes:
                last_write[buffer] = me
                reads.pop(buffer, None)
        elif kind == "record":
            events[op.event] = dict(clocks[op.stream])
        elif kind == "wait":
            if op.event in events:
                _join(clocks[op.stream], events[op.event])
        elif kind == "wait_stream":
            _join(clocks[op.stream], clocks[op.on])
        elif kind == "sync":
            everything: Clock = {}
            for clock in clocks.values():
                _join(everything, clock)
            for clock in clocks.values():
                _join(clock, everything)
    return list(found.values())
