"""What a simulation returns: kernel runs, stream busy times, host spans and record→wait arrows."""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(slots=True)
class SimResult:
    makespan_us: float
    host_end_us: float
    kernels: list[KernelRun]
    streams: dict[str, float]
    host_spans: list[HostSpan] = field(default_factory=list)
    flows: list[FlowArrow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

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
