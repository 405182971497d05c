"""``ProgramBuilder``: issue stream operations in host order and get an ``ir.Program`` back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from simulator.cost import CostModel, KernelSpec
from simulator.errors import InputError
from simulator.ir import (
    CaptureBegin,
    CaptureEnd,
    HostCosts,
    Launch,
    Program,
    Record,
    Replay,
    SetStream,
    StreamKind,
    StreamSpec,
    Sync,
    Wait,
    WaitStream,
)


class ProgramBuilder:
    """Collects one host thread's ops. Kernels may be given as ``Launch`` ops or as ``KernelSpec``s (costed
    with ``cost``). ``current`` is the host's current stream (``set_stream`` changes it); ops that take no
    explicit stream use it. ``region`` (see :meth:`in_region`) tags launches with an annotation range.
    ``specs`` keeps the ``KernelSpec``s costed so far, in launch order (for fits against measured ops)."""

    def __init__(self, name: str | None = None, host: HostCosts | None = None,
                 cost: CostModel | None = None, main: str = "main",
                 main_kind: StreamKind = "nonblocking") -> None:
        self.name = name
        self.host = host or HostCosts()
        self.cost = cost
        self.streams: dict[str, StreamSpec] = {main: StreamSpec(kind=main_kind)}
        self.ops: list = []
        self.specs: list[KernelSpec] = []
        self.current = main
        self.region: str | None = None
        self._counters: dict[str, int] = {}
        self._capturing: str | None = None

    def stream(self, name: str, kind: StreamKind = "nonblocking") -> str:
        """Declare a stream (idempotent for the same kind)."""
        if name in self.streams and self.streams[name].kind != kind:
            raise InputError(f"stream {name!r} already declared as {self.streams[name].kind}")
        self.streams[name] = StreamSpec(kind=kind)
        return name

    def fresh(self, prefix: str) -> str:
        """A name unique within this builder: ``prefix``, then ``prefix#1``, ``prefix#2``..."""
        n = self._counters.get(prefix, 0)
        self._counters[prefix] = n + 1
        return prefix if n == 0 else f"{prefix}#{n}"

    def _stream(self, stream: str | None) -> str:
        name = stream or self.current
        if name not in self.streams:
            raise InputError(f"undeclared stream {name!r}")
        return name

    def launch(self, kernel: Launch | KernelSpec, stream: str | None = None) -> Launch:
        """Launch a kernel on ``stream`` (default: the current stream)."""
        target = self._stream(stream)
        if isinstance(kernel, KernelSpec):
            if self.cost is None:
                raise InputError(f"kernel {kernel.name!r} has no duration and the builder has no cost model")
            op = self.cost.launch(kernel, target, self.region)
            self.specs.append(kernel)
        else:
            op = kernel.model_copy(update={"stream": target, "region": kernel.region or self.region})
        self.ops.append(op)
        return op

    def record(self, event: str, stream: str | None = None) -> None:
        self.ops.append(Record(event=event, stream=self._stream(stream)))

    def wait(self, event: str, stream: str | None = None) -> None:
        """``stream`` waits for ``event`` as last recorded."""
        self.ops.append(Wait(stream=self._stream(stream), event=event))

    def wait_stream(self, on: str, stream: str | None = None) -> None:
        """``stream`` waits for all work queued so far on ``on``."""
        self.ops.append(WaitStream(stream=self._stream(stream), on=self._stream(on)))

    def set_stream(self, stream: str) -> None:
        self.current = self._stream(stream)
        self.ops.append(SetStream(stream=self.current))

    def sync(self) -> None:
        self.ops.append(Sync())

    @contextmanager
    def using(self, stream: str) -> Iterator[str]:
        """``with torch.cuda.stream(s):`` — switch to ``stream`` and back (two ``set_stream`` ops)."""
        previous = self.current
        self.set_stream(stream)
        try:
            yield stream
        finally:
            self.set_stream(previous)

    @contextmanager
    def in_region(self, region: str) -> Iterator[None]:
        """Tag the launches issued inside with ``region`` (like ``record_function``)."""
        previous, self.region = self.region, region
        try:
            yield
        finally:
            self.region = previous

    @contextmanager
    def capture(self, graph: str, stream: str | None = None) -> Iterator[str]:
        """Graph capture on ``stream``: ``capture_begin``, the ops issued inside, ``capture_end``."""
        if self._capturing is not None:
            raise InputError(f"capture of {graph!r} inside capture of {self._capturing!r}")
        self.ops.append(CaptureBegin(graph=graph, stream=self._stream(stream)))
        self._capturing = graph
        try:
            yield graph
        finally:
            self._capturing = None
        self.ops.append(CaptureEnd(graph=graph))

    def replay(self, graph: str) -> None:
        self.ops.append(Replay(graph=graph))

    def build(self) -> Program:
        return Program(name=self.name, streams=dict(self.streams), host=self.host, ops=tuple(self.ops))
