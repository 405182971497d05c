"""Compact typed records of the Kineto events the importer keeps (everything else is dropped on read).

Times are µs on the trace's own clock. Strings that repeat (names, categories) are interned by the reader,
so a trace of a million kernels costs about as much memory as a million small tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class GpuOp(NamedTuple):
    """A kernel, memcpy or memset as the device ran it."""

    kind: str  # "kernel" | "memcpy" | "memset"
    name: str
    device: int
    stream: int
    ts: float
    dur: float
    corr: int | None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    regs: int | None = None
    smem: int | None = None
    blocks_per_sm: float | None = None
    occupancy_pct: float | None = None
    nbytes: int | None = None


class HostCall(NamedTuple):
    """A CUDA runtime or driver API call on a host thread."""

    name: str
    pid: int
    tid: int
    ts: float
    dur: float
    corr: int | None


class Range(NamedTuple):
    """A host-side ``record_function`` range (``user_annotation``, kind ``range``) or a module call (kind
    ``module``: an ``nn.Module: Class_N`` python event, or a ``file.py(N): forward`` frame, by its class or frame;
    after import, ``name`` is the ``/``-joined path of the module calls enclosing it, outermost first)."""

    name: str
    pid: int
    tid: int
    ts: float
    dur: float
    kind: str = "range"

    @property
    def end(self) -> float:
        return self.ts + self.dur


class CpuOp(NamedTuple):
    """An operator (``cpu_op``) with its input shapes and dtypes when the profile recorded them."""

    name: str
    tid: int
    ts: float
    dur: float
    dims: tuple[tuple[int, ...] | None, ...] = ()
    types: tuple[str, ...] = ()


class SyncOp(NamedTuple):
    """A ``cuda_sync`` record: a stream waiting on an event (or a stream/context/event synchronize). Some Kineto
    builds name only the CUDA event (``event_id``), not the record call or its stream (``None`` then)."""

    kind: str
    device: int
    stream: int
    corr: int | None
    wait_on_stream: int | None
    record_corr: int | None
    event_id: int | None = None


class Flow(NamedTuple):
    """One end of an ``ac2g`` flow arrow (``s``: the launch call, ``f``: the GPU op)."""

    id: int
    phase: str
    pid: int
    tid: int
    ts: float


class DeviceProps(NamedTuple):
    """What ``deviceProperties`` says about one GPU (0 where a field is missing)."""

    id: int
    name: str
    num_sms: int
    max_threads_per_sm: int
    regs_per_sm: int
    smem_per_sm: int
    warp_size: int


@dataclass(slots=True)
class Trace:
    """Everything kept from one trace file."""

    source: str
    gpu_ops: list[GpuOp] = field(default_factory=list)
    host_calls: list[HostCall] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    modules: list[Range] = field(default_factory=list)
    frames: list[Range] = field(default_factory=list)
    cpu_ops: list[CpuOp] = field(default_factory=list)
    syncs: list[SyncOp] = field(default_factory=list)
    flows: list[Flow] = field(default_factory=list)
    devices: dict[int, DeviceProps] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    events_read: int = 0
    bytes_read: int = 0
    metadata: dict[str, object] = field(default_factory=dict)
