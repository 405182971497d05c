"""The report's sections from scenarios, an optional real trace and validation data; and the entry points
other commands call to write their ``--html`` page (``run``, ``sweep``, ``validate``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.advice import dp_gate_note
from simulator.report import figures
from simulator.report.collect import ScenarioData, collect_scenario, load_scenarios, profiles_of, provenance_line
from simulator.report.page import Section, header_fields, write_page
from simulator.report.trace import TraceTimeline, load_trace_timeline
from simulator.report.validation import read_validation, validate_profiles
from simulator.scenario import Scenario

SECTION_KEYS = ("timelines", "gains", "calibration", "threshold-map", "hazards")


@dataclass(frozen=True)
class ReportSummary:
    """What was written: the page, its figures and each section's state (``ok`` or why it is empty)."""

    html: str
    figures: list[str]
    sections: dict[str, str]
    profiles: list[str]

    def to_json_dict(self) -> dict[str, Any]:
        return {"html": self.html, "figures": self.figures, "sections": self.sections, "profiles": self.profiles}


def timeline_section(scenarios: list[ScenarioData], trace: TraceTimeline | None) -> Section:
    s = Section("timelines", "Timelines", intro=[
        "One simulated decoder layer (attention block + MoE block, captured and replayed as one graph) per "
        "strategy: a lane per stream (host, main, aux, communication), collectives in the communication colour, "
        "arrows from each event record to the wait it satisfied. Hover a bar for the kernel and its times."])
    for i, data in enumerate(scenarios, start=1):
        s.figures.append((f"fig-timeline-{i}", figures.timeline_figure(data)))
        s.notes += [f"{data.label}: {n}" for n in data.notes]
    if trace is not None:
        s.figures.append(("fig-trace", figures.trace_figure(trace)))
        s.notes += [f"trace {trace.source}: {w}" for w in trace.warnings]
    return s


def gains_section(scenarios: list[ScenarioData]) -> Section:
    s = Section("gains", "Gain curves", intro=[
        "Decode-step (TPOT) gain of each strategy over sequential across each scenario's thresholds.concurrency "
        "grid (knobs off, DBO off), in the scenario's layout and its counterpart on the same GPUs (DP attention + "
        "EP vs TP + EP). Stars mark the recommended token threshold: the largest batch at which multi_stream "
        "beats the best alternative by the scenario's margin."])
    for data in scenarios:
        rec = data.recommendation
        if rec is not None:
            s.items.append(f"{data.label} ({rec.curve.layout}, {rec.profile}): {', '.join(rec.settings())}")
            note = dp_gate_note(rec)
            if note:
                s.items.append(f"{data.label}: {note}")
    if any(d.recommendation for d in scenarios):
        s.figures.append(("fig-gains", figures.gain_figure(scenarios)))
    else:
        s.missing = "No gain curve: multi_stream does not apply to any scenario's model."
    return s


def threshold_section(scenarios: list[ScenarioData]) -> Section:
    s = Section("threshold-map", "Threshold map", intro=[
        "Which strategy gives the fastest decode step at each concurrency, per platform and parallelism, and by "
        "how much it beats the runner-up."])
    if any(d.recommendation for d in scenarios):
        s.figures.append(("fig-threshold-map", figures.threshold_map_figure(scenarios)))
    else:
        s.missing = "No threshold map: multi_stream does not apply to any scenario's model."
    return s


def calibration_section(report: dict[str, Any] | None, why: str) -> Section:
    s = Section("calibration", "Calibration", intro=[
        "The simulator against kernels_real's measured MoE layer times (moesim validate): points on y = x are "
        "exact; the grey band is ±3%. Faded points were used by the fit; solid ones are held out."])
    if report is None or not report.get("cases"):
        s.missing = why
        return s
    s.intro.append(f"validated: {why}")
    for mode, e in report.get("per_mode", {}).items():
        if e.get("n"):
            s.items.append(f"{mode}: {e['n']} held-out cases, median |error| {_pct(e['median_abs_error'])}, "
                           f"p90 {_pct(e['p90_abs_error'])}")
    s.figures.append(("fig-calibration", figures.calibration_figure(report)))
    return s


def hazards_section(scenarios: list[ScenarioData]) -> Section:
    s = Section("hazards", "Hazards", intro=[
        "moesim check on every simulated schedule: cross-stream races on the kernels' buffers (vector clocks, "
        "as PyTorch's CUDA sanitizer) and graph-capture legality (unjoined forks, isolation)."])
    rows = [row for d in scenarios for row in d.hazards]
    s.figures.append(("fig-hazards", figures.hazards_figure(rows)))
    return s


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def build_sections(scenarios: list[ScenarioData], trace: TraceTimeline | None, validation: dict[str, Any] | None,
                   validation_note: str) -> list[Section]:
    return [timeline_section(scenarios, trace), gains_section(scenarios),
            calibration_section(validation, validation_note), threshold_section(scenarios),
            hazards_section(scenarios)]


def write_report(paths: list[str], html: str | Path, command: str, *, profile: str | None = None,
                 trace: str | None = None, validation: str | None = None, progress: bool = True) -> ReportSummary:
    """``moesim report``: load, simulate and draw everything, then write the page atomically."""
    return write_scenarios_report(load_scenarios(paths, profile), html, command, profile=profile, trace=trace,
                                  validation=validation, progress=progress)


def write_scenarios_report(scenarios: list[tuple[str, Scenario]], html: str | Path, command: str, *,
                           profile: str | None = None, trace: str | None = None, validation: str | None = None,
                           progress: bool = True) -> ReportSummary:
    """The report of already-parsed scenarios (``moesim run --html`` passes its one scenario)."""
    stored = read_validation(validation) if validation else None
    data = [collect_scenario(source, scenario) for source, scenario in scenarios]
    timeline = load_trace_timeline(trace, profile, progress=progress) if trace else None
    profiles = profiles_of(data)
    if stored is not None:
        report, why = stored, f"{stored.get('profile', 'profile')} (from {validation})"
    else:
        report, why = validate_profiles(profiles, progress=progress)
    sections = build_sections(data, timeline, report, why)
    lines = [provenance_line(p) for p in profiles]
    if timeline is not None and timeline.profile.name not in {p.name for p in profiles}:
        lines.append(provenance_line(timeline.profile) + " (trace replay)")
    extra = {"scenarios": [f"{d.source} ({d.label})" for d in data]}
    if trace:
        extra["trace"] = str(trace)
    title = "moesim design review — " + ", ".join(d.label for d in data)
    write_page(html, title, header_fields(lines, command, extra), sections)
    return ReportSummary(str(html), [div for s in sections for div, _ in s.figures],
                         {s.key: "ok" if s.missing is None else s.missing for s in sections}, lines)


def write_validation_html(report: dict[str, Any], html: str | Path, command: str) -> None:
    """``moesim validate --html F``: the calibration section on its own page (offline)."""
    why = report.get("profile", "profile")
    write_page(html, f"moesim validate — {why}", header_fields([str(why)], command),
               [calibration_section(report, str(why))])


def write_sweep_html(document: dict[str, Any], html: str | Path, command: str) -> None:
    """``moesim sweep --html F``: gain and step time against the sweep's first numeric axis."""
    cases = document.get("cases") or []
    profile = cases[0]["profile"]["describe"] if cases else "no cases"
    section = Section("sweep", "Sweep", intro=[
        f"{len(cases)} case(s) over " + ", ".join(f"{k} = {v}" for k, v in document.get("axes", {}).items())])
    if cases:
        section.figures.append(("fig-sweep", figures.sweep_figure(document)))
    else:
        section.missing = "The sweep has no cases."
    write_page(html, f"moesim sweep — {document.get('scenario', '')}", header_fields([profile], command),
               [section])
