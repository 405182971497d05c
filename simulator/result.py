"""What a simulation returns: kernel runs, stream busy times, host spans and record→wait arrows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


def _r(x: float) -> float:
    """Round to 1 ps so printed results are stable and readable."""
    return float(round(x, 6))


class KernelRun(NamedTuple):
    index: int
    name: str
    stream: str
    start_us: float
    end_us: float
    region: str | None = None
    replay: int | None = None

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


class HostSpan(NamedTuple):
    label: str
    start_us: float
    end_us: float


class FlowArrow(NamedTuple):
    """A satisfied cross-stream wait: the waited work was done on ``src`` at ``src_us``; ``dst`` passed
    the wait at ``dst_us``."""

    event: str
    src: str
    src_us: float
    dst: str
    dst_us: float


class SimResult:
    """What :func:`simulator.engine.simulate` returns. ``host_spans`` may be given as a function that builds
    them: it is called on first access (one span per costed host call, which most callers never read)."""

    __slots__ = ("_host_spans", "flows", "host_end_us", "kernels", "makespan_us", "streams", "warnings")

    def __init__(self, makespan_us: float, host_end_us: float, kernels: list[KernelRun], streams: dict[str, float],
                 host_spans: list[HostSpan] | Callable[[], list[HostSpan]] | None = None,
                 flows: list[FlowArrow] | None = None, warnings: list[str] | None = None) -> None:
        self.makespan_us = makespan_us
        self.host_end_us = host_end_us
        self.kernels = kernels
        self.streams = streams
        self._host_spans = [] if host_spans is None else host_spans
        self.flows = [] if flows is None else flows
        self.warnings = [] if warnings is None else warnings

    @property
    def host_spans(self) -> list[HostSpan]:
        if callable(self._host_spans):
            self._host_spans = self._host_spans()
        return self._host_spans

    def to_json_dict(self) -> dict[str, Any]:
        """The ``moesim sim --json`` shape."""
        return {
            "makespan_us": _r(self.makespan_us),
            "host_end_us": _r(self.host_end_us),
            "kernels": [
                {"name": k.name, "stream": k.stream, "start_us": _r(k.start_us), "end_us": _r(k.end_us)}
                for k in self.kernels
            ],
            "streams": {name: {"busy_us": _r(busy)} for name, busy in self.streams.items()},
            "warnings": list(self.warnings),
        }
