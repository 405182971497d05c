"""What the report shows, computed from the public simulator pieces: per scenario the evaluated strategies,
one simulated decoder layer per strategy (the timeline), the threshold recommendation (gain curves and the
threshold map) and the hazard check of each simulated schedule."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.errors import InputError
from simulator.evaluate import BASELINE, Evaluation, block_time, evaluate, moe_program
from simulator.expand import expand
from simulator.hazards import find_hazards
from simulator.ir import Program
from simulator.profile import Profile
from simulator.result import SimResult
from simulator.scenario import Scenario, load_document, parse_scenario, with_value
from simulator.thresholds import Recommendation, recommend


@dataclass(frozen=True)
class Timeline:
    """One strategy's simulated decoder layer (attention block + MoE block, replayed as one graph)."""

    label: str
    strategy: str
    ran: str
    layer_us: float
    program: Program
    result: SimResult


@dataclass(frozen=True)
class HazardRow:
    """What ``moesim check`` finds in one simulated schedule."""

    scenario: str
    label: str
    program: str
    hazards: list[str]
    capture_errors: list[str]
    warnings: list[str]

    @property
    def clean(self) -> bool:
        return not self.hazards and not self.capture_errors


@dataclass(frozen=True)
class ScenarioData:
    source: str
    scenario: Scenario
    evaluation: Evaluation
    timelines: list[Timeline]
    hazards: list[HazardRow]
    recommendation: Recommendation | None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.evaluation.scenario

    @property
    def profile(self) -> Profile:
        return self.evaluation.profile


def load_scenarios(paths: list[str], profile: str | None = None) -> list[tuple[str, Scenario]]:
    """The scenarios, each with ``platform.profile`` replaced by ``profile`` when one is given."""
    if not paths:
        raise InputError("give at least one scenario")
    out = []
    for path in paths:
        doc = load_document(path)
        if profile is not None:
            doc = with_value(doc, "platform.profile", profile)
        out.append((path, parse_scenario(doc, path)))
    return out


def strategy_label(strategy: str, dbo: bool) -> str:
    return strategy + (" + dbo" if dbo else "")


def collect_scenario(source: str, scenario: Scenario) -> ScenarioData:
    """Evaluate one scenario and simulate, check and recommend everything its figures need."""
    evaluation = evaluate(scenario, source)
    timelines, hazards, notes = [], [], []
    for r in evaluation.results:
        label = strategy_label(r.strategy, r.dbo)
        if r.ran is None:
            notes.append(f"{label}: not simulated ({r.note})")
            continue
        program = moe_program(evaluation.case, r.ran or BASELINE, 2 if r.dbo else 1, with_attention=True)
        layer_us, result = block_time(program, evaluation.profile)
        timelines.append(Timeline(label, r.strategy, r.ran, layer_us, program, result))
        hazards.append(check_row(evaluation.scenario, label, program))
    try:
        rec: Recommendation | None = recommend(scenario, source)
    except InputError as err:
        rec = None
        notes.append(f"no gain curve: {err}")
    return ScenarioData(source, scenario, evaluation, timelines, hazards, rec, notes)


def check_row(scenario: str, label: str, program: Program) -> HazardRow:
    expansion = expand(program)
    found = find_hazards(program, expansion)
    return HazardRow(scenario, label, program.name or "program", [h.describe() for h in found],
                     [f"{e.kind} in graph {e.graph!r}: {e.detail}" for e in expansion.capture_errors],
                     list(expansion.warnings))


def profiles_of(scenarios: list[ScenarioData]) -> list[Profile]:
    """The distinct profiles the scenarios ran on, in order of appearance."""
    seen: dict[str, Profile] = {}
    for s in scenarios:
        seen.setdefault(s.profile.name, s.profile)
    return list(seen.values())


def provenance_line(profile: Profile) -> str:
    """``calibrated on GPU, DATE`` or ``DATASHEET figures, not calibrated``, with the profile's name."""
    hw = profile.hardware
    if profile.provenance == "calibrated":
        sw = ", ".join(f"{k} {v}" for k, v in profile.software.model_dump().items() if v)
        return f"{profile.name}: calibrated on {hw.gpu}, {profile.date}" + (f" ({sw})" if sw else "")
    return f"{profile.name}: DATASHEET figures for {hw.gpu}, not calibrated ({profile.date})"

