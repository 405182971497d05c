"""Replay an imported trace and its what-if through the engine; the ``whatif trace`` report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.engine import simulate
from simulator.errors import InputError
from simulator.kineto.events import Trace
from simulator.kineto.program import HostTrace, LaunchMode, compile_program, import_trace
from simulator.kineto.reader import read_trace
from simulator.kineto.whatif import move_region
from simulator.profile import Profile, available_profiles, load_profile
from simulator.result import SimResult


@dataclass(slots=True)
class WhatIf:
    baseline: SimResult
    whatif: SimResult | None
    host: HostTrace
    profile: Profile
    launch: LaunchMode
    region: str | None
    instances: int = 0
    moved: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def baseline_us(self) -> float:
        return gpu_span(self.baseline)

    @property
    def whatif_us(self) -> float | None:
        return gpu_span(self.whatif) if self.whatif is not None else None

    def to_json_dict(self) -> dict[str, Any]:
        whatif = self.whatif_us
        gain = None if whatif is None or self.baseline_us <= 0 else 1.0 - whatif / self.baseline_us
        return {
            "baseline_us": round(self.baseline_us, 3),
            "whatif_us": None if whatif is None else round(whatif, 3),
            "measured_us": round(self.host.measured_us, 3),
            "kernels": len(self.baseline.kernels),
            "gain": None if gain is None else round(gain, 5),
            "baseline_error": round(self.baseline_us / self.host.measured_us - 1.0, 5)
            if self.host.measured_us > 0 else None,
            "launch": self.launch,
            "aux_region": self.region,
            "region_instances": self.instances,
            "moved_kernels": self.moved,
            "device": self.host.device,
            "thread": self.host.thread,
            "kernel_gap_us": round(self.host.gap_us, 3),
            "profile": self.profile.describe(),
            "sources": {
                "durations": "kernel durations as traced",
                "host": "traced API call times and gaps" if self.launch == "as-traced"
                else f"graph replay: replay and node gap from {self.profile.name}",
                "added_host_calls": f"{self.profile.name} host figures" if self.launch == "as-traced"
                else "none (graph replay)",
                "sharing": self.profile.interference.source,
            },
            "notes": list(self.notes),
            "warnings": list(self.host.warnings),
        }


def gpu_span(result: SimResult) -> float:
    if not result.kernels:
        return 0.0
    return max(k.end_us for k in result.kernels) - min(k.start_us for k in result.kernels)


def profile_for(trace: Trace, name: str | None) -> Profile:
    """The named profile, else the shipped one matching the traced GPU's name (calibrated first)."""
    if name is not None:
        return load_profile(name)
    gpus = {d.name.lower() for d in trace.devices.values() if d.name}
    matches = []
    for candidate in available_profiles():
        profile = load_profile(candidate)
        if profile.hardware.gpu.lower() in gpus:
            matches.append(profile)
    if not matches:
        seen = ", ".join(sorted(gpus)) or "no deviceProperties"
        raise InputError(f"no shipped profile matches the traced GPU ({seen}); pass --profile "
                         f"({', '.join(available_profiles())})")
    matches.sort(key=lambda p: (p.provenance != "calibrated", p.name))
    return matches[0]


def run_whatif(path: str | Path, region: str | None, *, join_after: str | None = None,
               launch: LaunchMode = "as-traced", profile: str | None = None, device: int | None = None,
               thread: int | None = None, progress: bool = True) -> WhatIf:
    """Import ``path``, replay it under ``launch`` and, when ``region`` is given, its aux-stream what-if."""
    trace = read_trace(path, progress=progress)
    prof = profile_for(trace, profile)
    host = import_trace(trace, prof, device=device, thread=thread)
    del trace
    sharing = prof.sharing_model()
    baseline = simulate(compile_program(host, host.items, prof, launch, name="baseline"), sharing)
    report = WhatIf(baseline=baseline, whatif=None, host=host, profile=prof, launch=launch, region=region)
    if region is not None:
        move = move_region(host, region, prof, launch, join_after)
        program = compile_program(host, move.items, prof, launch, name=f"whatif:{region}")
        report.whatif = simulate(program, sharing)
        report.instances, report.moved, report.notes = move.instances, move.moved, move.notes
    return report
