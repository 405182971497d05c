"""Accuracy of the trace-driven what-if against kernels_real's measurements.

    python benchmarks/whatif_accuracy.py [DIR] [--profile P] [--json]

DIR (default: the last ``calibration/measurements/**/`` folder with cases.json and traces/) holds ``cases.json`` and
``traces/{preset}_t{tokens}_sequential_eager.json.gz``. From each sequential eager trace the what-if moves
``moe.shared_experts`` to an aux stream, replayed as traced (eager) and as one graph replay (graph), and the
predicted layer time is compared with the measured multi_stream median of the same preset, token count and
mode: error = |predicted - measured| / measured. Two predictions are printed: ``raw`` (the what-if's GPU span)
and ``scaled`` (the measured sequential median × what-if / baseline, which cancels the profiler's own
overhead in the traced run). The "no change" row is the trivial predictor (multi_stream = sequential).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.kineto.replay import run_whatif  # noqa: E402

REGION = "moe.shared_experts"
TARGETS = {"graph": (0.015, 0.05), "eager": (0.03, 0.08)}  # median, worst


def _latest() -> Path:
    found = sorted(p.parent for p in (ROOT / "calibration" / "measurements").rglob("cases.json")
                   if (p.parent / "traces").is_dir())
    if not found:
        raise SystemExit("no calibration/measurements/**/cases.json with a traces/ folder yet")
    return found[-1]


def evaluate(folder: Path, profile: str | None) -> list[dict]:
    cases = json.loads((folder / "cases.json").read_text())
    median = {(c["preset"], c["tokens"], c["strategy"], c["mode"]): c["median_us"] for c in cases}
    rows = []
    for trace in sorted((folder / "traces").glob("*_sequential_eager.json*")):
        preset, tokens = _key(trace.name)
        for mode, launch in (("eager", "as-traced"), ("graph", "graph")):
            seq = median.get((preset, tokens, "sequential", mode))
            ms = median.get((preset, tokens, "multi_stream", mode))
            if seq is None or ms is None:
                continue
            r = run_whatif(trace, REGION, launch=launch, profile=profile, progress=False)
            whatif, base = r.whatif_us or 0.0, r.baseline_us
            rows.append({
                "preset": preset, "tokens": tokens, "mode": mode, "seq_us": seq, "ms_us": ms,
                "trace_span_us": r.host.measured_us, "baseline_us": base, "whatif_us": whatif,
                "raw_us": whatif, "scaled_us": seq * whatif / base,
                "gain_measured": (seq - ms) / seq, "gain_predicted": 1 - whatif / base,
                "profile": r.profile.describe(),
            })
    return rows


def _key(name: str) -> tuple[str, int]:
    stem = name.split("_sequential_eager")[0]
    preset, _, tokens = stem.rpartition("_t")
    return preset, int(tokens)


def summary(rows: list[dict], mode: str, column: str) -> dict:
    sel = [r for r in rows if r["mode"] == mode]
    errs = [abs(r[column] - r["ms_us"]) / r["ms_us"] for r in sel]
    signs = [r for r in sel if abs(r["gain_measured"]) > 0.02]
    wrong = [r for r in signs if (r["gain_predicted"] > 0) != (r["gain_measured"] > 0)]
    return {"mode": mode, "predictor": column, "cases": len(sel),
            "median_err": statistics.median(errs) if errs else None, "worst_err": max(errs, default=None),
            "sign_checked": len(signs), "sign_wrong": len(wrong)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path)
    parser.add_argument("--profile", help="profile (default: matched to the traced GPU, calibrated first)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folder = args.folder or _latest()
    rows = evaluate(folder, args.profile)
    for r in rows:
        r["nochange_us"] = r["seq_us"]
    summaries = [summary(rows, mode, col) for mode in ("graph", "eager") for col in ("raw_us", "scaled_us",
                                                                                     "nochange_us")]
    if args.json:
        print(json.dumps({"folder": str(folder), "rows": rows, "summary": summaries}, indent=2))
        return 0
    print(f"measurements: {folder}  (profile: {rows[0]['profile'] if rows else '-'})")
    print(f"{'preset':<22}{'tok':>5} {'mode':<6}{'seq':>9}{'ms meas':>9}{'raw':>9}{'scaled':>9}"
          f"{'gain meas':>10}{'gain pred':>10}{'err raw':>9}{'err scl':>9}")
    for r in rows:
        e_raw = abs(r["raw_us"] - r["ms_us"]) / r["ms_us"]
        e_scl = abs(r["scaled_us"] - r["ms_us"]) / r["ms_us"]
        print(f"{r['preset']:<22}{r['tokens']:>5} {r['mode']:<6}{r['seq_us']:>9.1f}{r['ms_us']:>9.1f}"
              f"{r['raw_us']:>9.1f}{r['scaled_us']:>9.1f}{r['gain_measured']:>+10.2%}{r['gain_predicted']:>+10.2%}"
              f"{e_raw:>9.2%}{e_scl:>9.2%}")
    print()
    for s in summaries:
        med, worst = TARGETS[s["mode"]]
        print(f"{s['mode']:<6} {s['predictor']:<12} n={s['cases']:<3} median {_pct(s['median_err']):>7} "
              f"(target {med:.1%})  worst {_pct(s['worst_err']):>7} (target {worst:.0%})  "
              f"sign wrong {s['sign_wrong']}/{s['sign_checked']} where |gain| > 2%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
