"""Markdown tables of a ``moesim validate`` report (``simulator.validation.evaluate``) and of the profile's
sharing-form choice: the figure tables of ``calibration/VALIDATION.md``, generated so that they cannot go stale
(``benchmarks/regen_docs.py`` rewrites them; ``moesim validate --markdown`` prints the first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simulator.profile import Profile
from simulator.validation import TARGETS, predict_case, routing_line
from simulator.workloads.presets import get_preset

WORST_CASES = 10
GAIN_TOKENS = (1, 1024)  # calibration-split token counts shown beside the held-out ones in the graph gain table


def _pct(x: float | None, sign: bool = False) -> str:
    return "n/a" if x is None else (f"{x:+.1%}" if sign else f"{x:.1%}")


def _stats(errors: Sequence[float]) -> tuple[int, str, str]:
    if not errors:
        return 0, "n/a", "n/a"
    a = np.abs(np.asarray(errors))
    return len(a), _pct(float(np.median(a))), _pct(float(np.percentile(a, 90)))


def _table(header: Sequence[str], align: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |",
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def targets_table(report: dict[str, Any]) -> list[str]:
    """Each target of each mode on the held-out cases: the figure, met or missed (by how much)."""
    rows = []
    for mode, entry in report["per_mode"].items():
        for key, t in entry["targets"].items():
            if key == "sign_agreement":
                s = entry["sign_agreement"]
                wrong = "; ".join(f"{w['preset']} @ {w['tokens']} tokens (measured {_pct(w['measured_gain'], True)}, "
                                  f"predicted {_pct(w['predicted_gain'], True)})" for w in s["wrong"])
                rows.append([mode, f"multi_stream gain sign right where \\|measured gain\\| > {s['threshold']:.0%}",
                             f"**{s['agree']} / {s['counted']}**", "met" if t["met"] else f"**missed**: {wrong}"])
                continue
            name = "median" if key == "median_abs_error" else "p90"
            verdict = "met" if t["met"] else (f"**missed by {(t['got'] - t['target']) * 100:.1f} points**"
                                              if t["got"] is not None else "**missed** (no cases)")
            rows.append([mode, f"{name} \\|error\\| ≤ {t['target']:.0%}", f"**{_pct(t['got'])}**", verdict])
    return _table(["mode", "target", "got", ""], ["---"] * 4, rows)


def split_tables(report: dict[str, Any]) -> list[str]:
    """Errors per mode and split, then per held-out slice (strategy, held-out presets, held-out tokens)."""
    cases = report["cases"]
    rows = []
    for mode in TARGETS:
        for split, label in (("validation", "held out"), ("calibration", "calibration")):
            errs = [c["error"] for c in cases if c["mode"] == mode and c["split"] == split]
            rows.append([mode, label, *_stats(errs)])
    align = ["---", "---", "---:", "---:", "---:"]
    out = _table(["mode", "split", "cases", "median abs error", "p90 abs error"], align, rows)
    presets = {get_preset(p).name for p in report["holdout"]["presets"]}
    tokens = report["holdout"]["tokens"]
    rows = []
    for mode in TARGETS:
        held = [c for c in cases if c["mode"] == mode and c["split"] == "validation"]
        for strategy in ("sequential", "multi_stream", "fused_shared"):
            errs = [c["error"] for c in held if c["strategy"] == strategy]
            rows.append([mode, f"strategy {strategy}", *_stats(errs)])
        for p in sorted(presets):
            rows.append([mode, f"preset {p} (all tokens)", *_stats([c["error"] for c in held if c["preset"] == p])])
        if tokens:
            rows.append([mode, f"tokens {', '.join(map(str, tokens))} (other presets)",
                         *_stats([c["error"] for c in held if c["preset"] not in presets])])
    return [*out, "", *_table(["mode", "held-out slice", "cases", "median abs error", "p90 abs error"], align, rows)]


def worst_table(report: dict[str, Any], mode: str = "graph", n: int = WORST_CASES) -> list[str]:
    """The ``n`` held-out cases of ``mode`` with the largest |error|."""
    held = [c for c in report["cases"] if c["mode"] == mode and c["split"] == "validation"]
    worst = sorted(held, key=lambda c: -abs(c["error"]))[:n]
    rows = [[c["preset"], c["tokens"], c["strategy"], f"{c['measured_us']:.1f}", f"{c['predicted_us']:.1f}",
             _pct(c["error"], True)] for c in worst]
    return [f"Worst held-out {mode} cases:", "",
            *_table(["preset", "tokens", "strategy", "measured µs", "predicted µs", "error"],
                    ["---", "---:", "---", "---:", "---:", "---:"], rows)]


def gains_table(report: dict[str, Any], mode: str) -> list[str]:
    """Measured vs predicted multi_stream gain: held-out cases (graph: also the calibration presets at
    ``GAIN_TOKENS``), ✓/✗ where |measured gain| is above the mode's sign threshold."""
    threshold = TARGETS[mode]["gain_threshold"]
    order = {get_preset(c["preset"]).name: i for i, c in enumerate(report["cases"])}
    gains = [g for g in report["gains"] if g["mode"] == mode
             and (g["split"] == "validation" or (mode == "graph" and g["tokens"] in GAIN_TOKENS))]
    gains.sort(key=lambda g: (order.get(g["preset"], 0), g["tokens"]))
    rows = []
    for g in gains:
        mark = "" if abs(g["measured_gain"]) <= threshold else (" ✓" if g["agree"] else " ✗")
        split = "held out" if g["split"] == "validation" else "calibration" + (" (not counted)" if mark else "")
        row = [g["preset"], g["tokens"], _pct(g["measured_gain"], True), _pct(g["predicted_gain"], True) + mark]
        rows.append([*row, split] if mode == "graph" else row)
    head = ["preset", "tokens", "measured gain", "predicted gain"] + (["split"] if mode == "graph" else [])
    what = ("held-out token counts and presets, plus " + " and ".join(map(str, GAIN_TOKENS))
            + " tokens of the calibration presets" if mode == "graph" else "held-out cases")
    return [f"Multi_stream gain vs sequential, {mode} mode ({what}; ✓/✗ where \\|measured gain\\| > {threshold:.0%}):",
            "", *_table(head, ["---", "---:", "---:", "---:", "---"][:len(head)], rows)]


def report_markdown(report: dict[str, Any]) -> str:
    """All figure tables of a validation report, with its profile named."""
    lines = [f"Profile: {report['profile']}; {len(report['cases'])} cases; held out: presets "
             f"{', '.join(report['holdout']['presets']) or '-'}, tokens "
             f"{', '.join(map(str, report['holdout']['tokens'])) or '-'}; {routing_line(report)}.", "",
             *targets_table(report), "", *split_tables(report), "", *worst_table(report), "",
             *gains_table(report, "graph"), "", *gains_table(report, "eager")]
    return "\n".join(lines) + "\n"


def fit_markdown(profile: Profile) -> str:
    """What the profile's fit recorded: where the eager host costs come from, the split, the chosen sharing form and its
    parameters."""
    layer = profile.fit.get("layer") or {}
    i = profile.interference
    params = ", ".join(f"`{k}` {v}" for k, v in i.params.items())
    if "eager_cases" in layer:
        report = layer["eager_host"]
        host = (f"eager host costs of {report['ops']} torch ops measured profiler-free in `{layer['eager_cases']}` "
                f"(medians over {report['cases']} calls of its calibration-split cases, no scale fitted)")
    else:
        host = (f"eager host-cost scale × {layer.get('host_scale', 'n/a')} (on the microbench's per-op host costs), "
                f"fitted on {layer.get('calibration_cases', 'n/a')} calibration-split cases")
    return (f"Profile {profile.describe()}: {host}; held out: presets "
            f"{', '.join(layer.get('holdout_presets', [])) or '-'}, tokens "
            f"{', '.join(map(str, layer.get('holdout_tokens', []))) or '-'}. Sharing form **{i.form}**: {params}.\n")


def sharing_markdown(profile: Profile, cases: Sequence[dict[str, Any]]) -> str:
    """The sharing forms the fit compared (``profile.fit['interference']``): held-out co-run side errors and
    calibration layer-gain errors as recorded, plus each form simulated on the held-out graph multi_stream
    cases (never used by any fit or choice), and unfitted fluid sharing for reference."""
    from simulator.validation import recorded_holdout, split_of

    fit = profile.fit.get("interference") or {}
    held = [c for c in cases if c["mode"] == "graph" and c["strategy"] == "multi_stream"
            and split_of(c, *recorded_holdout(profile)) == "validation"]

    def held_out(form: str, params: dict[str, Any]) -> str:
        sharing = profile.interference.model_copy(update={"form": form, "params": params}).sharing_model()
        errs = [predict_case(profile, c, sharing) / float(c["median_us"]) - 1.0 for c in held]
        _, med, p90 = _stats(errs)
        return f"{med} / {p90}"

    rows = []
    for form in ("fluid", "slowdown", "residency"):
        entry = fit.get(form)
        if not entry:
            continue
        co, gain = entry.get("held_out_side_error", {}), entry.get("calibration_layer_gain_error", {})
        name = f"**{form}**" if form == profile.interference.form else form
        rows.append([name, ", ".join(f"{k} {v}" for k, v in entry["params"].items()),
                     f"{_pct(co.get('median_abs'))} / {_pct(co.get('p90_abs'))} (n = {co.get('n', 'n/a')})",
                     _pct(gain.get("median_abs")), held_out(form, entry["params"])])
    rows.append(["(unfitted fluid, reference)", "—", "—", "—", held_out("fluid", {})])
    return "\n".join([
        *_table(["form", "fitted parameters", "co-run sides, held out (alternate halves): median / p90",
                 "calibration layer gains: median error",
                 f"held-out graph multi_stream cases ({len(held)}): median / p90"], ["---"] * 5, rows),
        "", _kept_line(profile, fit)]) + "\n"


def _kept_line(profile: Profile, fit: dict[str, Any]) -> str:
    if profile.fit.get("interference_graph"):
        return (f"These eager co-run fits are not the profile's model: its sharing form comes from the co-runs "
                f"inside CUDA graphs (next table). The eager fit's reason: {fit.get('why', 'none recorded')}.")
    return f"Kept: **{profile.interference.form}**. The fit's reason: {fit.get('why', 'none recorded')}."


def corun_forms_markdown(profile: Profile) -> str:
    """The sharing forms compared on the decode-regime co-runs inside graphs (``profile.fit['interference_graph']``:
    fitted on the R/G pairs, scored on the held-out S|RG pairs) and the measured graph fork/join cost."""
    forms = profile.fit.get("interference_graph")
    if not forms:
        return f"Profile {profile.describe()} was not fitted on graph co-runs (`moesim calibrate --decode`).\n"
    rows = []
    for form, entry in forms.items():
        fit, held = entry["fit_pair_time_error"], entry["held_out_pair_time_error"]
        overlap = entry["held_out_overlap_error_points"]
        name = f"**{form}**" if form == profile.interference.form else form
        rows.append([name, ", ".join(f"{k} {v}" for k, v in entry["params"].items()) or "— (unfitted)",
                     f"{_pct(fit.get('median_abs'))} / {_pct(fit.get('p90_abs'))} (n = {fit.get('n')})",
                     f"{_pct(held.get('median_abs'))} / {_pct(held.get('p90_abs'))} (n = {held.get('n')})",
                     f"{overlap.get('median_abs', 0):.2f} / {overlap.get('p90_abs', 0):.2f} / "
                     f"{overlap.get('max_abs', 0):.2f}"])
    join = profile.host.graph_join_us
    lines = _table(["form", "fitted parameters", "fitted pairs' time: median / p90",
                    "held-out S|RG pairs' time: median / p90", "held-out overlap error, points: median / p90 / max"],
                   ["---"] * 5, rows)
    units = "; ".join(f"`{k}`: {v}" for k, v in profile.interference.units.items())
    return "\n".join([*lines, "", f"Kept: **{profile.interference.form}** ({units}).",
                      f"Graph fork/join: {join.value:.2f} µs — {join.source}." if join else
                      "Graph fork/join: not measured."]) + "\n"
