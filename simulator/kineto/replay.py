"""Replay an imported trace and its what-if through the engine; the ``whatif trace`` report.

A trace whose metadata says ``moesim_layers_per_trace: N`` (kernels_real's eager traces of N back-to-back
layer calls) is replayed whole; its per-layer figures are the replayed spans divided by N.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from simulator.engine import simulate
from simulator.errors import InputError
from simulator.ir import gc_paused
from simulator.kineto.comm import mark_comm
from simulator.kineto.events import Trace
from simulator.kineto.overlay import overlay_durations
from simulator.kineto.program import (
    HostTrace,
    Item,
    LaunchMode,
    attach_demand,
    compile_program,
    drop_operators,
    import_trace,
)
from simulator.kineto.reader import read_trace
from simulator.kineto.select import Selector, listing
from simulator.kineto.whatif import move_kernels, move_region
from simulator.kineto.whatif import serialize_aux as serialize_aux_streams
from simulator.placement import placement_for
from simulator.profile import Profile, available_profiles, load_profile
from simulator.result import SimResult
from simulator.sharing import SharingModel

SharingForm = Literal["profile", "placement"]


@dataclass(slots=True)
class WhatIf:
    baseline: SimResult
    whatif: SimResult | None
    host: HostTrace
    profile: Profile
    launch: LaunchMode
    what: Selector | None
    instances: int = 0
    moved: int = 0
    notes: list[str] = field(default_factory=list)
    durations: str = "kernel durations as traced"
    traced_node_gap_us: float | None = None
    layers: int = 1
    host_scale: float = 1.0
    measured_layer_us: float | None = None
    serialized: bool = False
    kernels: str | None = None  # --aux-kernels, as given
    sharing: SharingForm = "placement"  # how overlapping kernels share the GPU (see run_whatif)

    @property
    def region(self) -> str | None:
        """What was moved, as given (a range name or a module path), or that the aux streams were serialized."""
        if self.serialized:
            return "aux streams serialized"
        return self.what.text if self.what is not None else self.kernels

    @property
    def baseline_layer_us(self) -> float:
        """The baseline's GPU span per layer call of the trace."""
        return self.baseline_us / self.layers

    @property
    def whatif_layer_us(self) -> float | None:
        """The what-if's GPU span per layer call of the trace."""
        whatif = self.whatif_us
        return None if whatif is None else whatif / self.layers

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
            "layers_per_trace": self.layers,
            "baseline_per_layer_us": round(self.baseline_layer_us, 3),
            "whatif_per_layer_us": None if whatif is None else round(whatif / self.layers, 3),
            "gain": None if gain is None else round(gain, 5),
            "baseline_error": round(self.baseline_us / self.host.measured_us - 1.0, 5)
            if self.host.measured_us > 0 else None,
            "launch": self.launch,
            "aux_region": self.what.text if self.what is not None and self.what.kind == "range" else None,
            "aux_module": self.what.text if self.what is not None and self.what.kind == "module" else None,
            "serialize_aux": self.serialized,
            "aux_kernels": self.kernels,
            "region_instances": self.instances,
            "moved_kernels": self.moved,
            "device": self.host.device,
            "thread": self.host.thread,
            "kernel_gap_us": round(self.host.gap_us, 3),
            "host_scale": self.host_scale,
            "sharing_form": self.sharing,
            "profile": self.profile.describe(),
            "sources": {
                "durations": self.durations,
                "host": self._host_source() if self.launch == "as-traced"
                else f"graph replay: replay cost and node gap from {self.profile.name}"
                + (f" (the durations trace's node gap, {self.traced_node_gap_us:.3f} µs, is a profiled one: "
                   "not used)" if self.traced_node_gap_us is not None else ""),
                "added_host_calls": f"{self.profile.name} host figures" if self.launch == "as-traced"
                else "none (graph replay)",
                "sharing": self._sharing_source(),
            },
            "notes": list(self.notes),
            "warnings": list(self.host.warnings),
        }

    def _sharing_source(self) -> str:
        if self.sharing == "placement":
            latency = self.profile.memory_latency
            return (f"block placement on {self.profile.hardware.sm_count} SMs from the traced GEMM kernels' grids and "
                    f"occupancy (simulator.placement); the other kernels and the GEMVs (GEMM kernels of light blocks) "
                    f"slowed under the HBM load, by kernel class, by "
                    + (f"{self.profile.name}'s memory_latency ({latency.source})" if latency is not None else
                       f"nothing ({self.profile.name} has no measured memory_latency)")
                    + f"; bandwidth and tensor-rate capacities from {self.profile.name}'s co-run fit: "
                    f"{self.profile.interference.source}")
        return self.profile.interference.source

    def _host_source(self) -> str:
        if self.measured_layer_us is None:
            return "traced API call times and gaps"
        return (f"traced API call times and gaps, time between submissions x {self.host_scale:.4g} so that the "
                f"baseline lasts the measured {self.measured_layer_us:.3f} µs per layer")


def gpu_span(result: SimResult) -> float:
    if not result.kernels:
        return 0.0
    return max(k.end_us for k in result.kernels) - min(k.start_us for k in result.kernels)


def layers_per_trace(trace: Trace) -> int:
    """``moesim_layers_per_trace`` from the trace's top-level metadata (1 when absent)."""
    value = trace.metadata.get("moesim_layers_per_trace", 1)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1 or int(value) != value:
        raise InputError(f"{trace.source}: moesim_layers_per_trace must be a whole number >= 1, got {value!r}")
    return int(value)


def profile_for(trace: Trace, name: str | Profile | None) -> Profile:
    """The profile given (a name, a JSON path or a loaded one), else the shipped one matching the traced GPU's
    name (calibrated first)."""
    if isinstance(name, Profile):
        return name
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


def parse_positions(text: str, option: str) -> list[tuple[int, int]]:
    """``3-5,9`` as runs ``[(3, 5), (9, 9)]`` (positions >= 0, each run ascending)."""
    runs = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            a, b = int(first), int(last or first)
        except ValueError:
            raise InputError(f"{option} {text!r}: give positions like 3-5,9") from None
        if a < 0 or b < a:
            raise InputError(f"{option} {text!r}: positions are >= 0 and each run ascending (a-b with a <= b)")
        runs.append((a, b))
    return runs


def selectors(region: str | None, module: str | None, join_after: str | None,
              join_after_module: str | None) -> tuple[Selector | None, Selector | None]:
    """(what to move, what to join after) from the options; giving one kind twice is an ``InputError``."""
    if region is not None and module is not None:
        raise InputError("give one of --aux-region (a record_function range) and --aux-module (a module path)")
    if join_after is not None and join_after_module is not None:
        raise InputError("give one of --join-after and --join-after-module")
    what = Selector("range", region) if region is not None else \
        Selector("module", module) if module is not None else None
    join = Selector("range", join_after, True) if join_after is not None else \
        Selector("module", join_after_module, True) if join_after_module is not None else None
    if join is not None and what is None:
        raise InputError(f"{join.option} needs --aux-region or --aux-module")
    return what, join


def list_modules(path: str | Path, profile: str | None = None, device: int | None = None,
                 thread: int | None = None, progress: bool = True) -> dict[str, Any]:
    """``--list-modules``: the module tree and ranges of the replayed thread (:func:`select.listing`)."""
    with gc_paused():
        return listing(load_host(path, profile, device, thread, progress)[2])


def load_host(path: str | Path, profile: str | Profile | None = None, device: int | None = None,
              thread: int | None = None, progress: bool = True) -> tuple[Trace, Profile, HostTrace]:
    """Read and import ``path`` (the profile named, else the one matching the traced GPU)."""
    trace = read_trace(path, progress=progress)
    prof = profile_for(trace, profile)
    return trace, prof, import_trace(trace, prof, device=device, thread=thread)


def run_whatif(path: str | Path, region: str | None, *, join_after: str | None = None, module: str | None = None,
               join_after_module: str | None = None, launch: LaunchMode = "as-traced",
               profile: str | Profile | None = None, device: int | None = None, thread: int | None = None,
               durations_from: str | Path | None = None,
               host_scale: float = 1.0, measured_layer_us: float | None = None, serialize_aux: bool = False,
               aux_kernels: str | None = None, join_after_kernel: str | None = None, progress: bool = True,
               sharing: SharingForm = "placement") -> WhatIf:
    """Import ``path``, replay it under ``launch`` and, when ``region`` (a ``record_function`` range) or
    ``module`` (a module class path, :mod:`simulator.kineto.select`) is given, its aux-stream what-if, or with
    ``serialize_aux`` the reverse (every stream's work on the main stream; see :func:`_run_whatif`).
    ``sharing``: how overlapping kernels share the GPU: ``placement`` (default), block placement from each GEMM
    kernel's traced grid and occupancy (:mod:`simulator.placement`); ``profile``, the profile's fitted form. Python's
    cyclic collector is paused throughout: the records are acyclic, and its passes over a heap of millions of
    them would make the time grow faster than the trace."""
    with gc_paused():
        return _run_whatif(path, region, join_after=join_after, module=module, join_after_module=join_after_module,
                           launch=launch, profile=profile, device=device, thread=thread,
                           durations_from=durations_from, host_scale=host_scale,
                           measured_layer_us=measured_layer_us, serialize_aux=serialize_aux,
                           aux_kernels=aux_kernels, join_after_kernel=join_after_kernel, progress=progress,
                           sharing=sharing)


def _run_whatif(path: str | Path, region: str | None, *, join_after: str | None, module: str | None,
                join_after_module: str | None, launch: LaunchMode, profile: str | Profile | None, device: int | None,
                thread: int | None, durations_from: str | Path | None, host_scale: float,
                measured_layer_us: float | None, serialize_aux: bool, aux_kernels: str | None,
                join_after_kernel: str | None, progress: bool, sharing: SharingForm) -> WhatIf:
    """:func:`run_whatif`'s work. ``durations_from``: a trace of the same kernel sequence (e.g. its CUDA-graph
    run) whose kernel durations replace the traced ones; ``host_scale`` multiplies the traced host time between
    submissions, or (``measured_layer_us``, as-traced only) is fitted so that the baseline replay lasts that
    long per layer (:func:`fit_host_scale`: a profiler slows the host, not the kernels). The trace is replayed
    whole; ``WhatIf.layers`` is its ``moesim_layers_per_trace`` (per-layer figures divide by it)."""
    if host_scale <= 0:
        raise InputError(f"host scale must be positive, got {host_scale}")
    if measured_layer_us is not None and (launch != "as-traced" or not measured_layer_us > 0):
        raise InputError("a measured time to fit the host to needs --launch as-traced and a positive number of "
                         f"µs, got {measured_layer_us} with --launch {launch}")
    what, join = selectors(region, module, join_after, join_after_module)
    if serialize_aux and what is not None:
        raise InputError(f"--serialize-aux asks the reverse question: give it without {what.option}")
    runs = parse_positions(aux_kernels, "--aux-kernels") if aux_kernels is not None else None
    joins = [a for a, _ in parse_positions(join_after_kernel, "--join-after-kernel")] \
        if join_after_kernel is not None else None
    if runs is not None and (what is not None or serialize_aux):
        raise InputError("--aux-kernels selects by position: give it without --aux-region / --aux-module / "
                         "--serialize-aux")
    if joins is not None and runs is None:
        raise InputError("--join-after-kernel needs --aux-kernels")
    trace, prof, host = load_host(path, profile, device, thread, progress)
    layers = layers_per_trace(trace)
    notes = []
    durations = "kernel durations as traced"
    traced_gap = None
    if durations_from is not None:
        durations, traced_gap = overlay_durations(host, read_trace(durations_from, progress=progress), layers)
        attach_demand(host.items, trace, host.device, prof)
    if shapeless_gemms(host.items):
        notes.append("no GEMM kernel of the trace carries its operator's shapes (a CUDA-graph replay records none; an "
                     "eager trace needs the profiler's record_shapes): their bytes, so the HBM they draw, are unknown, "
                     "and the latency-bound kernels beside them are not slowed by it (the gain tends to come out too "
                     "high); trace with shapes, and for CUDA graphs give the same steps' eager trace as TRACE with "
                     "--durations-from the graph trace")
    if layers > 1:
        notes.append(f"the trace holds {layers} layer calls: replayed whole, per-layer figures are spans / {layers}")
    comms = mark_comm(host.items, prof)
    if comms:
        notes.append(f"{comms} collective kernels replayed as waits: each ends no earlier than its traced end (its "
                     f"peers' arrival) and its start plus a transfer time from {prof.name}'s link figures, holding "
                     "few SMs meanwhile")
    del trace
    move = serialize_aux_streams(host) if serialize_aux else \
        move_region(host, what, prof, launch, join) if what is not None else \
        move_kernels(host, runs, joins, prof, launch) if runs is not None else None
    drop_operators(host.items, move.items if move is not None else [])
    model = sharing_model(prof, sharing)
    if measured_layer_us is not None:
        host_scale, baseline = fit_host_scale(host, prof, measured_layer_us, layers, progress=progress,
                                              sharing=model)
        notes.append(f"traced host time between submissions scaled by {host_scale:.4g} to last the measured "
                     f"{measured_layer_us:.3f} µs per layer" + (" (already longer unscaled: not scaled)"
                                                               if host_scale == 1.0 else ""))
    else:
        if host_scale != 1.0 and launch == "as-traced":
            notes.append(f"traced host time between submissions scaled by {host_scale:.4g}")
        baseline = replay_baseline(host, prof, launch, host_scale, model)
    if move is not None:  # the what-if's timeline is the one drawn: the baseline's host spans are never read
        baseline = SimResult(baseline.makespan_us, baseline.host_end_us, baseline.kernels, baseline.streams,
                             None, baseline.flows, baseline.warnings)  # (their builder holds the whole program)
    report = WhatIf(baseline=baseline, whatif=None, host=host, profile=prof, launch=launch, what=what,
                    notes=notes, durations=durations, traced_node_gap_us=traced_gap, layers=layers,
                    host_scale=host_scale, measured_layer_us=measured_layer_us, serialized=serialize_aux,
                    kernels=None if runs is None else f"GPU ops {aux_kernels} of each period", sharing=sharing)
    if measured_layer_us is not None and report.baseline_layer_us > measured_layer_us * (1 + 1e-6):
        notes.append(f"the traced kernels alone last longer than the measured {measured_layer_us:.3f} µs per "
                     f"layer (baseline {report.baseline_layer_us:.3f} µs with almost no host time left): they "
                     "ran slower in the trace than in the measured run")
    if move is not None:
        program = compile_program(host, move.items, prof, launch, name=f"whatif:{report.region}",
                                  host_scale=host_scale)
        report.whatif = simulate(program, model)
        report.instances, report.moved = move.instances, move.moved
        report.notes += move.notes
    return report


def shapeless_gemms(items: Sequence[Item]) -> bool:
    """Whether the trace has GEMM kernels and none of them carries its bytes (the operator's shapes)."""
    gemms = [item.demand for item in items
             if item.demand is not None and item.demand.family in ("gemm", "grouped_gemm")]
    return bool(gemms) and all(d.nbytes is None for d in gemms)


def sharing_model(profile: Profile, sharing: SharingForm) -> SharingModel:
    """The engine's sharing model for ``sharing`` (``placement`` or ``profile``) on ``profile``'s GPU."""
    if sharing not in ("placement", "profile"):
        raise InputError(f"unknown sharing {sharing!r}; expected placement or profile")
    return placement_for(profile) if sharing == "placement" else profile.sharing_model()


def sharing_label(sharing: SharingForm) -> str:
    """How tables name the sharing a what-if ran with (appended to the profile's description)."""
    return "; sharing: block placement" if sharing == "placement" else \
        "; sharing: the profile's fitted form (--sharing profile)"


def replay_baseline(host: HostTrace, profile: Profile, launch: LaunchMode, host_scale: float,
                    sharing: SharingModel) -> SimResult:
    """The imported trace replayed as it is (under ``launch``, traced host time times ``host_scale``)."""
    return simulate(compile_program(host, host.items, profile, launch, name="baseline", host_scale=host_scale),
                    sharing)


def fit_host_scale(host: HostTrace, profile: Profile, layer_us: float, layers: int = 1, steps: int = 30,
                   progress: bool = False, sharing: SharingModel | None = None) -> tuple[float, SimResult]:
    """The factor on traced host time between submissions that makes the as-traced baseline replay's GPU span
    per layer (of ``layers`` in the trace) ``layer_us`` (bisection over (0.001, 1]: only the profiler's
    slowdown of the host is taken out, so 1 when even the unscaled replay is not longer than the target), and
    the baseline replay at that factor (one of the replays the fit ran). ``progress``: a bar on stderr counts
    the replays (one per step). ``sharing``: the engine's sharing model (default: the profile's)."""
    sharing = sharing if sharing is not None else profile.sharing_model()

    def replay(scale: float) -> SimResult:
        return replay_baseline(host, profile, "as-traced", scale, sharing)

    lo, hi = 1e-3, 1.0
    at_hi = replay(hi)
    if gpu_span(at_hi) / layers <= layer_us:
        return hi, at_hi
    for _ in tqdm(range(steps), desc="fitting the host to the measured time", file=sys.stderr,
                  disable=True if not progress else None, leave=False):  # None: only on a terminal
        mid = (lo + hi) / 2
        at_mid = replay(mid)
        if gpu_span(at_mid) / layers < layer_us:
            lo = mid
        else:
            hi, at_hi = mid, at_mid
    return hi, at_hi
