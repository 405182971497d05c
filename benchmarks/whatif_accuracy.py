"""Accuracy of the trace-driven what-if against kernels_real's measurements (issue 5's targets).

    python benchmarks/whatif_accuracy.py [DIR] [--run SUBDIR ...] [--profile P] [--eager-durations traced|graph]
                                         [--graph-durations graph|traced] [--json]

DIR (default: the last ``calibration/measurements/**/`` folder holding ``kernels_real/``) holds
``kernels_real/cases.json`` (graph medians), ``kernels_real/traces/`` and, when present, eager re-runs
``kernels_real_eager2/`` (all eager cases of a preset interleaved, eager traces of N back-to-back layer calls)
or ``kernels_real_eager/`` (strategies interleaved per token count): the first present re-run's
``cases.json`` supersedes the eager records of ``kernels_real``, and its ``traces/`` (if it has the
sequential eager trace) supersede ``kernels_real``'s eager traces in eager mode. ``--run SUBDIR`` instead takes
everything (graph and eager medians and traces, sanity traces) from one bench run ``DIR/SUBDIR`` that timed
and traced both modes in the same call (e.g. ``kernels_real6``); several ``--run`` (repeats of the same bench
command) give each run's tables and a pooled one: per case the mean over the runs of the measured times and of
the predictions (each run's from its own traces), which averages out the spread between runs. From each
``{preset}_t{tokens}_sequential_eager`` trace the what-if moves ``moe.shared_experts`` to an aux stream and
predicts the multi_stream time of the same preset and token count:

- graph: the eager trace's kernels replayed as one graph (node gap and replay cost from the profile), with
  kernel durations taken from the case's sequential graph trace, mapped by position in the kernel sequence
  (the graph trace has no ranges; its kernel order and count match the eager trace's, L copies per replay),
  or (``--graph-durations traced``) as in the eager trace itself;
- eager: the trace replayed as traced, host time between submissions scaled by the factor that makes the
  replay of the sequential trace last the measured sequential median (takes the profiler's slowdown of the
  host out; uses only the sequential run; the scale is printed); where the records hold per-weight-set steady
  medians, the measured eager times are the mean over the weight sets the sequential trace holds (a trace may
  hold fewer sets than were timed: ``measured_us``);
  kernel durations as traced, or (``--eager-durations graph``) from the graph trace as above.

An eager trace whose metadata says ``moesim_layers_per_trace: N`` is replayed whole and its spans (baseline
and what-if alike) are divided by N before they are compared with per-layer medians (graph mode replays its
N layers as one graph, durations mapped by position within a layer); N = 1 traces are used as they are.

Error = |predicted - measured| / measured of the multi_stream time. Predictors: ``raw`` (the what-if's GPU
span), ``anchored`` (measured sequential median x what-if / baseline: the predicted gain applied to the
measured sequential time) and ``no change`` (multi_stream = measured sequential). Baseline sanity: every
trace in ``traces/`` replayed as traced must reproduce its own span of GPU work within 2%.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

import ijson
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.kineto.replay import run_whatif, sharing_label  # noqa: E402

REGION = "moe.shared_experts"
TARGETS = {"graph": (0.015, 0.05), "eager": (0.03, 0.08)}  # median, worst
SIGN_MIN_GAIN = 0.02
SANITY = 0.02
PREDICTORS = ("raw_us", "anchored_us", "nochange_us")
EAGER_RERUNS = ("kernels_real_eager2", "kernels_real_eager")  # first present wins
_DURATIONS = {"graph": "from the sequential graph trace", "traced": "as in the eager trace"}


def _latest() -> Path:
    found = sorted(p.parent for p in (ROOT / "calibration" / "measurements").rglob("kernels_real")
                   if (p / "cases.json").is_file() and (p / "traces").is_dir())
    if not found:
        raise SystemExit("no calibration/measurements/**/kernels_real with cases.json and traces/ yet")
    return found[-1]


def _cases(path: Path, mode: str) -> dict[tuple[str, int, str], dict]:
    """The records of one mode of a bench run's ``cases.json``, by (preset, tokens, strategy)."""
    return {(c["preset"], c["tokens"], c["strategy"]): c for c in json.loads(path.read_text()) if c["mode"] == mode}


def measured_us(case: dict, mode: str, trace_sets: list[int] | None = None) -> tuple[float, str]:
    """Measured per-call time and which statistic it is. Graph: the median (a replay runs every weight set).
    Eager, where the record has per-set steady medians (``steady_set_medians_us``) and ``trace_sets`` names the
    weight set of each call the trace holds: the mean of those sets' steady medians, call by call (like with
    like: a trace may hold fewer sets than were timed); else the mean over all sets; else the steady median
    (calls behind the previous one in a burst; older runs, where short bursts make it one weight set's time);
    else the median of all calls."""
    if mode == "graph":
        return case["median_us"], "median"
    per_set = case.get("steady_set_medians_us")
    if per_set and trace_sets and max(trace_sets) < len(per_set):
        return statistics.fmean(per_set[s] for s in trace_sets), "sets in trace"
    for key, what in (("steady_sets_mean_us", "all sets"), ("steady_median_us", "steady median")):
        if key in case:
            return case[key], what
    return case["median_us"], "median"


def trace_sets(path: Path) -> list[int] | None:
    """The weight set of each layer call an eager kernels_real trace holds (call ``i`` ran set ``i mod
    moesim_weight_sets``, the sets the bench run seeds as 100 + k, the same in its timing), None when the trace
    does not say."""
    meta: dict[str, int] = {}
    with path.open("rb") as raw:
        stream = gzip.GzipFile(fileobj=raw) if raw.read(2) == b"\x1f\x8b" else raw
        raw.seek(0)
        for prefix, event, value in ijson.parse(stream):
            if prefix in ("moesim_weight_sets", "moesim_layers_per_trace") and event == "number":
                meta[prefix] = int(value)
                if len(meta) == 2:
                    break
    sets, calls = meta.get("moesim_weight_sets"), meta.get("moesim_layers_per_trace")
    return None if not sets or not calls else [i % sets for i in range(calls)]


def sources_of(folder: Path, run: str | None) -> tuple[Path, Path]:
    """The bench runs giving graph and eager medians and traces: ``run`` for both, else ``kernels_real`` and
    the first eager re-run present."""
    if run is not None:
        return folder / run, folder / run
    real = folder / "kernels_real"
    return real, next((folder / d for d in EAGER_RERUNS if (folder / d / "cases.json").is_file()), real)


def evaluate(folder: Path, run: str | None, profile: str | None, eager_durations: str,
             graph_durations: str = "graph", sharing: str = "placement") -> tuple[list[dict], dict[str, str]]:
    real, rerun = sources_of(folder, run)
    eager_cases = rerun / "cases.json"
    records = {"graph": _cases(real / "cases.json", "graph"), "eager": _cases(eager_cases, "eager")}
    sources = {"graph": str((real / "cases.json").relative_to(folder)), "eager": str(eager_cases.relative_to(folder))}
    rows = []
    names = sorted({p.name for d in (real, rerun) for p in (d / "traces").glob("*_sequential_eager.json*")})
    for name in tqdm(names, desc="what-if", file=sys.stderr, leave=False, disable=None):
        preset, tokens = _key(name)
        graph_trace = real / "traces" / name.replace("_eager", "_graph")
        for mode in ("graph", "eager"):
            seq_case = records[mode].get((preset, tokens, "sequential"))
            ms_case = records[mode].get((preset, tokens, "multi_stream"))
            trace = next(d / "traces" / name for d in ((real, rerun) if mode == "graph" else (rerun, real))
                          if (d / "traces" / name).is_file())
            if seq_case is None or ms_case is None:
                continue
            sets = trace_sets(trace) if mode == "eager" else None
            (seq, statistic), (ms, _) = measured_us(seq_case, mode, sets), measured_us(ms_case, mode, sets)
            timed_sets = seq_case.get("weight_sets")
            durations = graph_durations if mode == "graph" else eager_durations
            overlay = graph_trace if graph_trace.exists() and durations == "graph" else None
            r = run_whatif(trace, REGION, launch="graph" if mode == "graph" else "as-traced", profile=profile,
                           durations_from=overlay, measured_layer_us=None if mode == "graph" else seq,
                           progress=False, sharing=sharing)
            whatif, base = r.whatif_layer_us or 0.0, r.baseline_layer_us
            rows.append({
                "preset": preset, "tokens": tokens, "mode": mode, "seq_us": seq, "ms_us": ms,
                "trace": str(trace.relative_to(folder)), "layers_per_trace": r.layers,
                "trace_sets": sorted(set(sets)) if sets else None, "timed_sets": timed_sets, "statistic": statistic,
                "host_scale": r.host_scale, "durations": "graph trace" if overlay else "as traced",
                "baseline_us": base, "whatif_us": whatif, "raw_us": whatif, "anchored_us": seq * whatif / base,
                "nochange_us": seq, "gain_measured": (seq - ms) / seq, "gain_predicted": 1 - whatif / base,
                "profile": r.profile.describe() + sharing_label(sharing),
            })
    return rows, sources


def sanity(folder: Path, run: str | None, profile: str | None) -> list[dict]:
    """Every trace (of ``run``, else of ``kernels_real`` and the eager re-runs) replayed as traced vs its own
    span of GPU work (whole traces: both spans cover all the layer calls the trace holds)."""
    out = []
    runs = (run,) if run is not None else ("kernels_real", *EAGER_RERUNS)
    traces = sorted(p for d in runs for p in (folder / d / "traces").glob("*.json*"))
    for trace in tqdm(traces, desc="sanity", file=sys.stderr, leave=False, disable=None):
        r = run_whatif(trace, None, profile=profile, progress=False)
        out.append({"trace": str(trace.relative_to(folder)), "measured_us": r.host.measured_us,
                    "replay_us": r.baseline_us,
                    "error": r.baseline_us / r.host.measured_us - 1.0})
    return out


def _key(name: str) -> tuple[str, int]:
    stem = name.split("_sequential_eager")[0]
    preset, _, tokens = stem.rpartition("_t")
    return preset, int(tokens)


def err(row: dict, column: str) -> float:
    return abs(row[column] - row["ms_us"]) / row["ms_us"]


def summary(rows: list[dict], mode: str, column: str) -> dict:
    sel = [r for r in rows if r["mode"] == mode]
    errs = [err(r, column) for r in sel]
    signs = [r for r in sel if abs(r["gain_measured"]) > SIGN_MIN_GAIN]
    if column == "nochange_us":
        wrong = signs  # "no change" predicts no sign at all
    else:
        wrong = [r for r in signs if (r["gain_predicted"] > 0) != (r["gain_measured"] > 0)]
    med, worst = TARGETS[mode]
    s = {"mode": mode, "predictor": column.removesuffix("_us"), "cases": len(sel),
         "median_err": statistics.median(errs) if errs else None, "worst_err": max(errs, default=None),
         "sign_checked": len(signs), "sign_wrong": len(wrong),
         "target_median": med, "target_worst": worst}
    s["met"] = bool(errs) and s["median_err"] <= med and s["worst_err"] <= worst and not wrong
    return s


def pooled(runs: list[list[dict]]) -> list[dict]:
    """Per (preset, tokens, mode) measured by every run: the mean over the runs of the measured times and of
    the predictions, gains recomputed from those means."""
    groups: dict[tuple, list[dict]] = {}
    for rows in runs:
        for r in rows:
            groups.setdefault((r["preset"], r["tokens"], r["mode"]), []).append(r)
    out = []
    for (preset, tokens, mode), rows in groups.items():
        if len(rows) < len(runs):
            continue
        mean = {k: statistics.fmean(r[k] for r in rows)
                for k in ("seq_us", "ms_us", "baseline_us", "whatif_us", "raw_us", "anchored_us", "nochange_us")}
        out.append({"preset": preset, "tokens": tokens, "mode": mode, **mean, "runs": len(rows),
                    "gain_measured": (mean["seq_us"] - mean["ms_us"]) / mean["seq_us"],
                    "gain_predicted": 1 - mean["whatif_us"] / mean["baseline_us"], "profile": rows[0]["profile"]})
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def markdown(folder: Path, rows: list[dict], sums: list[dict], checks: list[dict], sources: dict[str, str],
             eager_durations: str, graph_durations: str = "graph") -> str:
    lines = [f"Measurements: `{folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}` "
             f"(graph medians: `{sources['graph']}`, eager medians: `{sources['eager']}`). "
             f"Profile: {rows[0]['profile'] if rows else '-'}. Kernel durations: graph mode "
             f"{_DURATIONS[graph_durations]}, eager mode {_DURATIONS[eager_durations]}.", "",
             "| mode | predictor | cases | median err | target | worst err | target | sign wrong (abs gain > 2%) "
             "| met |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in sums:
        lines.append(f"| {s['mode']} | {s['predictor']} | {s['cases']} | {_pct(s['median_err'])} | "
                     f"≤ {s['target_median']:.1%} | {_pct(s['worst_err'])} | ≤ {s['target_worst']:.0%} | "
                     f"{s['sign_wrong']}/{s['sign_checked']} | {'yes' if s['met'] else 'no'} |")
    lines += ["", "| preset | tokens | mode | seq meas | ms meas | baseline | what-if (raw) | anchored | gain meas "
              "| gain pred | err raw | err anchored | err no-change |", "| --- | ---: | --- | " + "---: | " * 10]
    for r in sorted(rows, key=lambda r: (r["mode"], r["preset"], r["tokens"])):
        lines.append(f"| {r['preset']} | {r['tokens']} | {r['mode']} | {r['seq_us']:.1f} | {r['ms_us']:.1f} | "
                     f"{r['baseline_us']:.1f} | {r['raw_us']:.1f} | {r['anchored_us']:.1f} | "
                     f"{r['gain_measured']:+.2%} | {r['gain_predicted']:+.2%} | {err(r, 'raw_us'):.2%} | "
                     f"{err(r, 'anchored_us'):.2%} | {err(r, 'nochange_us'):.2%} |")
    partial = sorted({(r["preset"], len(r["trace_sets"]), r["timed_sets"], r["statistic"]) for r in rows
                      if r.get("trace_sets") and r.get("timed_sets") and len(r["trace_sets"]) < r["timed_sets"]})
    if partial:
        said = {"sets in trace": "measured eager time = mean of those sets' steady medians"}
        lines += ["", "Traces holding fewer weight sets than were timed (the sets route tokens differently): "
                  + "; ".join(f"{p} ({n} of {t}: "
                              + said.get(how, f"no per-set medians recorded, measured eager time = {how}") + ")"
                              for p, n, t, how in partial) + "."]
    if checks:
        bad = [c for c in checks if abs(c["error"]) > SANITY]
        worst = max(checks, key=lambda c: abs(c["error"]))
        lines += ["", f"Baseline sanity (every trace replayed as traced vs its own GPU span, target within "
                  f"{SANITY:.0%}): {len(checks) - len(bad)}/{len(checks)} within; worst {worst['error']:+.2%} "
                  f"({worst['trace']})."]
        lines += [f"- outside: `{c['trace']}` {c['error']:+.2%}" for c in bad]
    return "\n".join(lines) + "\n"


def results_for(folder: Path, runs: list[str] | None, profile: str | None, eager_durations: str = "traced",
                graph_durations: str = "graph", with_sanity: bool = True, sharing: str = "placement") -> list[dict]:
    """One result per run (``None``: ``kernels_real`` with its eager re-run), then a pooled one when there are
    several: rows, summaries, sanity checks and sources (the ``--json`` document)."""
    results = []
    for run in runs or (None,):
        rows, sources = evaluate(folder, run, profile, eager_durations, graph_durations, sharing)
        checks = sanity(folder, run, profile) if with_sanity else []
        results.append({"run": run, "folder": str(folder), "sources": sources, "rows": rows,
                        "summary": _summaries(rows), "sanity": checks})
    if len(results) > 1:
        rows = pooled([r["rows"] for r in results])
        names = ", ".join(str(r["run"]) for r in results)
        results.append({"run": "pooled", "folder": str(folder), "sources": {"graph": names, "eager": names},
                        "rows": rows, "summary": _summaries(rows), "sanity": []})
    return results


def render(folder: Path, results: list[dict], eager_durations: str = "traced", graph_durations: str = "graph") -> str:
    """The markdown the command prints: each run's tables (headed by the run when there are several)."""
    out = []
    for r in results:
        if len(results) > 1:
            out.append(f"### {'pooled: mean over the runs of each case' if r['run'] == 'pooled' else r['run']}\n\n")
        out.append(markdown(folder, r["rows"], r["summary"], r["sanity"], r["sources"], eager_durations,
                            graph_durations) + "\n")
    return "".join(out)


def targets_table(columns: list[tuple[str, dict]]) -> str:
    """One column per result (label, result): the raw predictor against each target, the worst case named,
    sign misses, and the baseline sanity."""
    def cell(res: dict, mode: str, what: str) -> str:
        s = next((x for x in res["summary"] if x["mode"] == mode and x["predictor"] == "raw"), None)
        if s is None or not s["cases"]:
            return "–"
        if what == "signs":
            return f"{s['sign_wrong']} wrong of {s['sign_checked']}"
        key = "median" if what == "median" else "worst"
        value, target = s[f"{key}_err"], s[f"target_{key}"]
        text = f"**{value:.2%}**" if value <= target else f"{value:.2%}"
        if what == "worst":
            worst = max((r for r in res["rows"] if r["mode"] == mode), key=lambda r: err(r, "raw_us"))
            text += f" ({worst['preset']} t{worst['tokens']})"
        return text

    def sanity_cell(res: dict) -> str:
        checks = res["sanity"]
        if not checks:
            return "–"
        within = sum(abs(c["error"]) <= SANITY for c in checks)
        worst = max(checks, key=lambda c: abs(c["error"]))["error"]
        ok = within == len(checks)
        return f"{'**' if ok else ''}{within}/{len(checks)}{'**' if ok else ''} (worst {worst:+.2%})"

    lines = ["| target | " + " | ".join(label for label, _ in columns) + " |",
             "| --- | " + " | ".join("---" for _ in columns) + " |"]
    for mode in ("graph", "eager"):
        med, worst = TARGETS[mode]
        for what, label in (("median", f"median ≤ {med:.1%}"), ("worst", f"worst ≤ {worst:.0%}"),
                            ("signs", f"signs (abs gain > {SIGN_MIN_GAIN:.0%})")):
            lines.append(f"| {mode} raw {label} | " + " | ".join(cell(r, mode, what) for _, r in columns) + " |")
    lines.append(f"| baseline sanity ≤ {SANITY:.0%} | " + " | ".join(sanity_cell(r) for _, r in columns) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="measurement folder holding kernels_real/")
    parser.add_argument("--run", action="append",
                        help="a bench run (subfolder of DIR) giving all medians and traces; repeat it for repeated "
                             "runs of one bench command: each run's tables, then the pooled one")
    parser.add_argument("--profile", help="profile (default: matched to the traced GPU, calibrated first)")
    parser.add_argument("--eager-durations", choices=("traced", "graph"), default="traced",
                        help="eager kernel durations: as in the eager trace, or from the graph trace")
    parser.add_argument("--graph-durations", choices=("graph", "traced"), default="graph",
                        help="graph-mode kernel durations: from the graph trace (default) or as in the eager trace")
    parser.add_argument("--no-sanity", action="store_true", help="skip the as-traced replay of every trace")
    parser.add_argument("--sharing", choices=("placement", "profile"), default="placement",
                        help="the what-if's sharing model (moesim whatif trace --sharing; default: placement)")
    parser.add_argument("--json", action="store_true", help="machine-readable output (default: markdown)")
    args = parser.parse_args()
    folder = (args.folder or _latest()).resolve()
    if folder.name == "kernels_real":
        folder = folder.parent
    for run in args.run or ():
        if not (folder / run / "cases.json").is_file():
            parser.error(f"{folder / run} has no cases.json")
    results = results_for(folder, args.run, args.profile, args.eager_durations, args.graph_durations,
                          not args.no_sanity, args.sharing)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
        return 0
    print(render(folder, results, args.eager_durations, args.graph_durations), end="")
    return 0


def _summaries(rows: list[dict]) -> list[dict]:
    modes = [mode for mode in ("graph", "eager") if any(r["mode"] == mode for r in rows)]  # measured ones
    return [summary(rows, mode, col) for mode in modes for col in PREDICTORS]


if __name__ == "__main__":
    sys.exit(main())
