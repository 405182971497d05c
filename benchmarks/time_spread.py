"""How reproducible a measured layer time is: the same bench command run twice in each of several device calls.

Reads kernels_real bench runs given as ``CALL=RUN`` (runs of one call share ``CALL``), pairs every two runs, and per
mode (graph, eager) prints how far the same case (preset × tokens × strategy) lies apart between two runs of one
call and between runs of different calls: |t_a / t_b − 1| over the cases both hold, median, p90 and worst, and
how far the multi_stream gain over sequential of the same point (preset × tokens) lies apart, in points. A model of
the layer time cannot be judged closer to a measurement than two measurements of it are to each other; ``moesim
validate``'s eager targets (median ≤ 5 %, p90 ≤ 10 %) are printed beside the spread.

    python benchmarks/time_spread.py                        # the six runs of calls 10-12 (one command, 2026-12-02)
    python benchmarks/time_spread.py 1=RUN_A 1=RUN_B 2=RUN_C [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import InputError, print_or_fail
from simulator.validation import TARGETS, load_cases

MEASUREMENTS = Path("calibration/measurements/h200/2026-12-02")
DEFAULT_RUNS = tuple(f"{call}={MEASUREMENTS / run}" for call, run in (
    ("10", "kernels_real6"), ("10", "kernels_real6_repeat"), ("11", "kernels_real7"),
    ("11", "kernels_real7_repeat"), ("12", "kernels_real8"), ("12", "kernels_real8_repeat")))
MODES = ("graph", "eager")

Case = tuple[str, int, str, str]  # preset, tokens, strategy, mode


def parse_run(arg: str) -> tuple[str, Path]:
    """``CALL=RUN`` → (call, run folder)."""
    call, sep, run = arg.partition("=")
    if not sep or not call or not run:
        raise InputError(f"{arg!r}: expected CALL=RUN (e.g. 10=calibration/measurements/h200/2026-12-02/kernels_real6)")
    return call, Path(run)


def medians(run: Path) -> dict[Case, float]:
    """The run's median µs per case (its own eager records: no re-measurement substituted)."""
    return {(str(c["preset"]), int(c["tokens"]), str(c["strategy"]), str(c["mode"])): float(c["median_us"])
            for c in load_cases(run, eager_rerun=False)}


def spread(runs: list[tuple[str, Path]]) -> dict[str, Any]:
    """Per mode and pairing (``same call`` / ``other calls``): pairs, case comparisons and |ratio − 1| stats."""
    times = [(call, run, medians(run)) for call, run in runs]
    diffs: dict[tuple[str, str], list[float]] = {}
    gain_diffs: dict[tuple[str, str], list[float]] = {}
    pairs: dict[tuple[str, str], int] = {}
    for (call_a, _, a), (call_b, _, b) in itertools.combinations(times, 2):
        pairing = "same call" if call_a == call_b else "other calls"
        for mode in MODES:
            shared = [k for k in a.keys() & b.keys() if k[3] == mode]
            if not shared:
                continue
            pairs[(mode, pairing)] = pairs.get((mode, pairing), 0) + 1
            diffs.setdefault((mode, pairing), []).extend(abs(a[k] / b[k] - 1.0) for k in shared)
            ga, gb = gains(a, mode), gains(b, mode)
            gain_diffs.setdefault((mode, pairing), []).extend(abs(ga[k] - gb[k]) for k in ga.keys() & gb.keys())
    rows = []
    for (mode, pairing), values in sorted(diffs.items()):
        arr = np.asarray(values)
        rows.append({"mode": mode, "pairing": pairing, "run_pairs": pairs[(mode, pairing)], "comparisons": len(arr),
                     "median": round(float(np.median(arr)), 5), "p90": round(float(np.quantile(arr, 0.9)), 5),
                     "worst": round(float(arr.max()), 5),
                     "gain_median_points": round(100 * float(np.median(gain_diffs[(mode, pairing)])), 3),
                     "gain_p90_points": round(100 * float(np.quantile(gain_diffs[(mode, pairing)], 0.9)), 3)})
    return {"runs": [{"call": call, "run": str(run)} for call, run in runs], "rows": rows,
            "widest": widest([t for _, _, t in times])}


def gains(times: dict[Case, float], mode: str) -> dict[tuple[str, int], float]:
    """(preset, tokens) → multi_stream gain over sequential (a fraction) in one run and mode."""
    return {(p, t): 1.0 - times[(p, t, "multi_stream", mode)] / seq for (p, t, s, m), seq in times.items()
            if m == mode and s == "sequential" and (p, t, "multi_stream", mode) in times}


def widest(times: list[dict[Case, float]], count: int = 5) -> list[dict[str, Any]]:
    """The eager cases whose times lie farthest apart over the runs (max / min − 1), widest first."""
    common = set.intersection(*(set(t) for t in times))
    spans = sorted(((max(t[k] for t in times) / min(t[k] for t in times) - 1.0, k) for k in common
                    if k[3] == "eager"), reverse=True)[:count]
    return [{"preset": k[0], "tokens": k[1], "strategy": k[2], "spread": round(s, 5),
             "us": [round(t[k], 1) for t in times]} for s, k in spans]


def markdown(report: dict[str, Any]) -> str:
    calls = sorted({r["call"] for r in report["runs"]})
    lines = [f"Runs: {', '.join('`' + r['run'] + '` (call ' + r['call'] + ')' for r in report['runs'])}: "
             f"{len(report['runs'])} runs of one bench command in {len(calls)} device calls. Per case (preset × "
             "tokens × strategy), |time in run A / time in run B − 1|, over every pair of runs.", "",
             "| mode | runs compared | run pairs | comparisons | median | p90 | worst | multi_stream gain apart, "
             "median / p90 (points) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in report["rows"]:
        lines.append(f"| {r['mode']} | {r['pairing']} | {r['run_pairs']} | {r['comparisons']} | "
                     f"{100 * r['median']:.1f}% | {100 * r['p90']:.1f}% | {100 * r['worst']:.1f}% | "
                     f"{r['gain_median_points']:.2f} / {r['gain_p90_points']:.2f} |")
    if report["widest"]:
        lines += ["", "Widest eager cases over all runs (max / min − 1; µs per run, in the order above):", "",
                  "| preset | tokens | strategy | spread | µs |", "| --- | ---: | --- | ---: | --- |"]
        lines += [f"| {w['preset']} | {w['tokens']} | {w['strategy']} | {100 * w['spread']:.0f}% | "
                  f"{', '.join(f'{u:.0f}' for u in w['us'])} |" for w in report["widest"]]
    eager = TARGETS["eager"]
    lines += ["", f"`moesim validate`'s eager targets: median ≤ {100 * eager['median_abs_error']:.0f}%, p90 ≤ "
                  f"{100 * eager['p90_abs_error']:.0f}% (against one run)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", default=list(DEFAULT_RUNS),
                        help="CALL=RUN bench output folders (default: the six runs of calls 10-12)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = parser.parse_args(argv)

    def run() -> str:
        runs = [parse_run(a) for a in args.runs]
        if len(runs) < 2:
            raise InputError("give at least two runs")
        report = spread(runs)
        return json.dumps(report, indent=2) if args.json else markdown(report)

    return print_or_fail(run)


if __name__ == "__main__":
    sys.exit(main())
