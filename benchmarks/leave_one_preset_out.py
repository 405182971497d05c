"""Leave one preset out: refit the profile without each preset in turn and predict that preset's cases.

For every preset of the measurements' ``cases.json``, ``calibration.fit.fit_profile`` runs with that preset
held out (its traces, its layer gains, its graph co-runs and its cases never enter the fit; no token count is
held out), and
``simulator.validation.evaluate`` scores its cases (with the decode folder: also its rank variants' graph
cases): graph and eager median / p90 |error| and whether the
multi_stream gain sign is right where the measured |gain| exceeds the mode's threshold.

    PYTHONPATH=. python benchmarks/leave_one_preset_out.py [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tqdm import tqdm

from calibration.fit import fit_profile
from simulator.profile import load_profile
from simulator.validation import evaluate, load_cases
from simulator.workloads.presets import split_rank_name

FOLDER = "calibration/measurements/h200/2026-12-02"
DECODE = "calibration/measurements/h200/2026-12-03"
TARGET_GRAPH_MEDIAN = 0.03


def eager_host() -> str | None:
    """The host-timed bench run the shipped profile's eager host costs come from (``moesim calibrate
    --eager-host``), or None: each refit takes its host costs from it too, without the held-out preset."""
    return (load_profile("h200").fit.get("layer") or {}).get("eager_cases")


def held_out(preset: str, cases: list[dict[str, Any]], decode: bool, host: str | None) -> dict[str, Any]:
    """The preset's validation figures under a profile fitted without it (``decode``: as ``moesim calibrate
    --decode``, the held-out preset's graph co-runs left out too; ``host``: :func:`eager_host`)."""
    profile = fit_profile(FOLDER, f"h200-without-{preset}", holdout_presets=[preset], holdout_tokens=[],
                          decode=DECODE if decode else None, eager_host=host)
    mine = [c for c in cases if split_rank_name(str(c["preset"]))[0] == preset]  # the preset and its rank variants
    report = evaluate(profile, mine, holdout_presets=sorted({str(c["preset"]) for c in mine}))
    out: dict[str, Any] = {"preset": preset}
    for mode, entry in report["per_mode"].items():
        signs = entry["sign_agreement"]
        out[mode] = {"n": entry["n"], "median_abs_error": entry["median_abs_error"],
                     "p90_abs_error": entry["p90_abs_error"], "signs_counted": signs["counted"],
                     "signs_right": signs["agree"]}
    return out


def rows(decode: bool = True) -> list[dict[str, Any]]:
    """One row per preset: its figures under a profile refitted without it."""
    host = eager_host()
    cases = [c for c in load_cases(FOLDER, eager_from=host) if c.get("device", "cuda") != "cpu"]
    if decode:
        cases += load_cases(f"{DECODE}/kernels_real9", eager_rerun=False)
    presets = sorted({split_rank_name(str(c["preset"]))[0] for c in cases})
    bar = tqdm(presets, desc="refits", disable=not sys.stderr.isatty())
    return [held_out(p, cases, decode, host) for p in bar]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [f"Measurements: `{FOLDER}` and the rank variants' graph cases of `{DECODE}/kernels_real9`. Each row: "
             "the profile refitted without the preset (its layer traces, layer cases and graph co-runs), the "
             "preset's and its rank variants' cases predicted.", "",
             "| preset held out | graph median | graph p90 | graph signs | eager median | eager p90 | eager signs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        g, e = r["graph"], r["eager"]
        lines.append(f"| {r['preset']} | {_pct(g['median_abs_error'])} | {_pct(g['p90_abs_error'])} | "
                     f"{g['signs_right']}/{g['signs_counted']} | {_pct(e['median_abs_error'])} | "
                     f"{_pct(e['p90_abs_error'])} | {e['signs_right']}/{e['signs_counted']} |")
    met = [r["preset"] for r in rows if (r["graph"]["median_abs_error"] or 1) <= TARGET_GRAPH_MEDIAN
           and r["graph"]["signs_right"] == r["graph"]["signs_counted"]]
    lines += ["", f"Graph median ≤ {TARGET_GRAPH_MEDIAN:.0%} with every sign right: {len(met)}/{len(rows)} presets "
              f"({', '.join(met) or 'none'})."]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-decode", action="store_true", help=f"fit without the decode-regime folder {DECODE}")
    args = ap.parse_args(argv)
    host = eager_host()
    cases = [c for c in load_cases(FOLDER, eager_from=host) if c.get("device", "cuda") != "cpu"]
    presets = sorted({split_rank_name(str(c["preset"]))[0] for c in cases})
    if not args.no_decode:
        cases += load_cases(f"{DECODE}/kernels_real9", eager_rerun=False)
    bar = tqdm(presets, desc="refits", disable=not sys.stderr.isatty())
    rows = [held_out(p, cases, not args.no_decode, host) for p in bar]
    print(json.dumps(rows, indent=1) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
