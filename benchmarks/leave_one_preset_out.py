"""Leave one preset out: refit the profile without each preset in turn and predict that preset's cases.

For every preset of the measurements' ``cases.json``, ``calibration.fit.fit_profile`` runs with that preset
held out (its traces, its layer gains and its cases never enter the fit; no token count is held out), and
``calibration.validate.evaluate`` scores its cases: graph and eager median / p90 |error| and whether the
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
from calibration.validate import evaluate, load_cases

FOLDER = "calibration/measurements/h200/2026-12-02"
TARGET_GRAPH_MEDIAN = 0.03


def held_out(preset: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The preset's validation figures under a profile fitted without it."""
    profile = fit_profile(FOLDER, f"h200-without-{preset}", holdout_presets=[preset], holdout_tokens=[])
    report = evaluate(profile, [c for c in cases if c["preset"] == preset], holdout_presets=[preset])
    out: dict[str, Any] = {"preset": preset}
    for mode, entry in report["per_mode"].items():
        signs = entry["sign_agreement"]
        out[mode] = {"n": entry["n"], "median_abs_error": entry["median_abs_error"],
                     "p90_abs_error": entry["p90_abs_error"], "signs_counted": signs["counted"],
                     "signs_right": signs["agree"]}
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [f"Measurements: `{FOLDER}`. Each row: profile refitted without the preset, its cases predicted.", "",
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
    args = ap.parse_args(argv)
    cases = [c for c in load_cases(FOLDER) if c.get("device", "cuda") != "cpu"]
    presets = sorted({str(c["preset"]) for c in cases})
    rows = [held_out(p, cases) for p in tqdm(presets, desc="refits", disable=not sys.stderr.isatty())]
    print(json.dumps(rows, indent=1) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
