"""A real Kineto trace next to its simulated replay, on one clock: the traced host thread's API calls and
GPU ops of the replayed device, and the engine's replay of the imported program (``--launch as-traced``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.engine import simulate
from simulator.kineto.program import compile_program, import_trace, stream_name
from simulator.kineto.reader import read_trace
from simulator.kineto.replay import gpu_span, profile_for
from simulator.profile import Profile
from simulator.result import HostSpan, KernelRun, SimResult


@dataclass(frozen=True)
class TraceTimeline:
    """Both timelines in µs after the first replayed host call (simulated time 0)."""

    source: str
    profile: Profile
    real_kernels: list[KernelRun]
    real_host: list[HostSpan]
    simulated: SimResult
    measured_us: float
    warnings: list[str]

    @property
    def simulated_us(self) -> float:
        return gpu_span(self.simulated)


def load_trace_timeline(path: str | Path, profile: str | None = None, progress: bool = True) -> TraceTimeline:
    """Import ``path``, replay it as traced, and keep the real ops of the replayed device and thread."""
    trace = read_trace(path, progress=progress)
    prof = profile_for(trace, profile)
    host = import_trace(trace, prof)
    origin = host.origin_us
    real = [KernelRun(i, op.name or "<unnamed>", stream_name(op.stream), op.ts - origin, op.ts + op.dur - origin)
            for i, op in enumerate(item.gpu for item in host.items if item.gpu is not None)]
    calls = [HostSpan(c.name, c.ts - origin, c.ts + c.dur - origin)
             for c in trace.host_calls if c.tid == host.thread]
    simulated = simulate(compile_program(host, host.items, prof, "as-traced", name="replay"), prof.sharing_model())
    return TraceTimeline(str(path), prof, real, calls, simulated, host.measured_us, list(host.warnings))
