"""Leave one preset out: refit the profile without each preset in turn and predict that preset's cases.

For every preset of the measurements' ``cases.json``, ``calibration.fit.fit_profile`` runs with that preset
held out (its traces, its layer gains, its graph co-runs and its cases never enter the fit; no token count is
held out), and
``simulator.validation.evaluate`` scores its cases (with the decode folder: also its rank variants' graph
cases): graph and eager median / p90 |error| and whether the
multi_stream gain sign is right where the measured |gain| exceeds the mode's threshold; and, for the graph
signs, only where another machine start measured the same sign beyond that threshold (``kernels_real10``, the
rank-variant matrix at 1-256 tokens timed on another start): a measured sign that flips between machine starts
cannot be predicted from shapes.

    PYTHONPATH=. python benchmarks/leave_one_preset_out.py [--json] [--no-decode]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tqdm import tqdm

from calibration.fit import fit_profile
from simulator.profile import load_profile
from simulator.validation import TARGETS, evaluate, load_cases, measured_gains
from simulator.workloads.presets import split_rank_name

FOLDER = "calibration/measurements/h200/2026-12-02"
DECODE = "calibration/measurements/h200/2026-12-03"
REFERENCE = f"{DECODE}/kernels_real10"
TARGET_GRAPH_MEDIAN = 0.03


def eager_host() -> str | None:
    """The host-timed bench run the shipped profile's eager host costs come from (``moesim calibrate
    --eager-host``), or None: each refit takes its host costs from it too, without the held-out preset."""
    return (load_profile("h200").fit.get("layer") or {}).get("eager_cases")


def replay_lengths() -> str | None:
    """The replay-length run the shipped profile's first-fork figure comes from (``moesim calibrate
    --replay-lengths``), or None: each refit takes it too, without the held-out preset's points."""
    return next((m for m in load_profile("h200").measurements if m.endswith("replay_lengths.json")), None)


def reproducible_signs(gains: list[dict[str, Any]], reference: dict[tuple[str, int], float]) -> dict[str, int]:
    """Graph multi_stream gain signs counted where |measured gain| exceeds the graph threshold and the
    ``reference`` start measured the same sign beyond it too: how many, and how many the model got right."""
    threshold = TARGETS["graph"]["gain_threshold"]
    counted = [g for g in gains if g["mode"] == "graph" and abs(g["measured_gain"]) > threshold
               and abs(reference.get((g["preset"], g["tokens"]), 0.0)) > threshold
               and (reference[(g["preset"], g["tokens"])] > 0) == (g["measured_gain"] > 0)]
    return {"counted": len(counted), "right": sum(1 for g in counted if g["agree"])}


def held_out(preset: str, cases: list[dict[str, Any]], decode: bool, host: str | None,
             reference: dict[tuple[str, int], float]) -> dict[str, Any]:
    """The preset's validation figures under a profile fitted without it (``decode``: as ``moesim calibrate
    --decode``, the held-out preset's graph co-runs left out too; ``host``: :func:`eager_host`)."""
    profile = fit_profile(FOLDER, f"h200-without-{preset}", holdout_presets=[preset], holdout_tokens=[],
                          decode=DECODE if decode else None, eager_host=host, replay_lengths=replay_lengths())
    mine = [c for c in cases if split_rank_name(str(c["preset"]))[0] == preset]  # the preset and its rank variants
    report = evaluate(profile, mine, holdout_presets=sorted({str(c["preset"]) for c in mine}))
    out: dict[str, Any] = {"preset": preset}
    for mode, entry in report["per_mode"].items():
        signs = entry["sign_agreement"]
        out[mode] = {"n": entry["n"], "median_abs_error": entry["median_abs_error"],
                     "p90_abs_error": entry["p90_abs_error"], "signs_counted": signs["counted"],
                     "signs_right": signs["agree"]}
    repro = reproducible_signs(report["gains"], reference)
    out["graph"].update(reproducible_signs_counted=repro["counted"], reproducible_signs_right=repro["right"])
    return out


def rows(decode: bool = True) -> list[dict[str, Any]]:
    """One row per preset: its figures under a profile refitted without it."""
    host = eager_host()
    cases = [c for c in load_cases(FOLDER, eager_from=host) if c.get("device", "cuda") != "cpu"]
    if decode:
        cases += load_cases(f"{DECODE}/kernels_real9", eager_rerun=False)
    presets = sorted({split_rank_name(str(c["preset"]))[0] for c in cases})
    reference = measured_gains([REFERENCE])
    bar = tqdm(presets, desc="refits", disable=not sys.stderr.isatty())
    return [held_out(p, cases, decode, host, reference) for p in bar]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [f"Measurements: `{FOLDER}` and the rank variants' graph cases of `{DECODE}/kernels_real9`. Each row: "
             "the profile refitted without the preset (its layer traces, layer cases and graph co-runs), the "
             "preset's and its rank variants' cases predicted. Graph signs where another start agrees: counted "
             f"only where `{REFERENCE}` (another machine start) measured the same sign beyond the threshold.", "",
             "| preset held out | graph median | graph p90 | graph signs | graph signs where another start agrees "
             "| eager median | eager p90 | eager signs |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        g, e = r["graph"], r["eager"]
        lines.append(f"| {r['preset']} | {_pct(g['median_abs_error'])} | {_pct(g['p90_abs_error'])} | "
                     f"{g['signs_right']}/{g['signs_counted']} | "
                     f"{g['reproducible_signs_right']}/{g['reproducible_signs_counted']} | "
                     f"{_pct(e['median_abs_error'])} | {_pct(e['p90_abs_error'])} | "
                     f"{e['signs_right']}/{e['signs_counted']} |")
    close = [r for r in rows if (r["graph"]["median_abs_error"] or 1) <= TARGET_GRAPH_MEDIAN]
    met = [r["preset"] for r in close if r["graph"]["signs_right"] == r["graph"]["signs_counted"]]
    robust = [r["preset"] for r in close
              if r["graph"]["reproducible_signs_right"] == r["graph"]["reproducible_signs_counted"]]
    lines += ["", f"Graph median ≤ {TARGET_GRAPH_MEDIAN:.0%} with every sign right: {len(met)}/{len(rows)} presets "
              f"({', '.join(met) or 'none'}); with every sign right where another start agrees: "
              f"{len(robust)}/{len(rows)} ({', '.join(robust) or 'none'})."]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-decode", action="store_true", help=f"fit without the decode-regime folder {DECODE}")
    args = ap.parse_args(argv)
    found = rows(decode=not args.no_decode)
    print(json.dumps(found, indent=1) if args.json else markdown(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
