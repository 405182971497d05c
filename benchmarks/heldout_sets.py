"""The eager trace what-if (the user's path) on every decode set at once: per set and pooled, how far its gains are
off the layout means and what its choices cost as a multi_stream policy.

The sets are the design set (call 29's eager traces against call 28's layout means) and the fresh sets measured
later (calls 30–31, 32, 33, 35), each a folder of sequential eager traces and a folder of layout means
(``benchmarks/whatif_eager_traces.py`` scores one set; this script scores them all and pools the points). Per
set: gain off (points, median / worst), signs wrong where |measured gain| > 1 %, predictions within ±1.5 points at
≤ 4 tokens, and the regret (points, mean / worst) of the what-if's choices (multi_stream where its predicted
gain exceeds ``--margin``) beside always multi_stream and vLLM's default. Nothing is fitted to these runs.

``--record FILE`` also writes the rows as JSON with the git commit and date, so the same command run on an older
checkout (``PYTHONPATH=<checkout> python benchmarks/heldout_sets.py --record ...``) keeps that model's figures;
``--recorded DIR`` prints the recorded rows of DIR's files under the current ones.

    python benchmarks/heldout_sets.py [--recorded calibration/heldout_runs] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import whatif_eager_traces as we
from whatif_graph_traces import Point

import simulator
from simulator.decisions import GainPoint, score
from simulator.errors import InputError, print_or_fail

ROOT = Path(__file__).resolve().parents[1]
MODEL_ROOT = Path(simulator.__file__).resolve().parents[1]
MEASUREMENTS = "calibration/measurements/h200/2026-12-03"


@dataclass(frozen=True)
class DecodeSet:
    """One set of decode points: its label, its sequential eager traces, its layout means, and its sequential
    graph traces (for the graph-trace what-if; read by ``benchmarks/regen_docs.py``)."""

    label: str
    eager: str
    means: str
    graph: str | None  # None: no graph traces measured


SETS = (
    DecodeSet("design: call 29 vs call 28", f"{MEASUREMENTS}/eager_traces", f"{MEASUREMENTS}/layout_means",
              f"{MEASUREMENTS}/layer_traces"),
    *(DecodeSet(label, f"{MEASUREMENTS}/eager_traces_heldout{suffix}", f"{MEASUREMENTS}/layout_means_heldout{suffix}",
                f"{MEASUREMENTS}/layer_traces_heldout{n}")
      for label, n, suffix in (("calls 30–31", 2, ""), ("call 32", 3, "3"), ("call 33", 4, "4"))),
    DecodeSet("call 35 (3/6/8/12 tokens)", f"{MEASUREMENTS}/eager_traces_heldout5",
              f"{MEASUREMENTS}/layout_means_heldout5", None),
)
HELD_OUT = SETS[1:]  # the sets measured after the design set


@dataclass(frozen=True)
class SetRow:
    """One set's (or the pool's) figures, in points (percentage points of the layer time)."""

    label: str
    points: int
    off_median: float
    off_worst: float
    signs_wrong: int
    signs_counted: int
    within: int
    small: int
    whatif_mean: float
    whatif_worst: float
    always_mean: float
    always_worst: float
    vllm_mean: float
    vllm_worst: float


def row(label: str, found: list[GainPoint], margin: float) -> SetRow:
    """The figures of ``found`` (measured and predicted gains, fractions)."""
    offs = [abs(p.predicted_gain - p.measured_gain) for p in found]
    counted = [p for p in found if abs(p.measured_gain) > 0.01]
    small = [abs(p.predicted_gain - p.measured_gain) for p in found if p.tokens <= 4]
    by = {s.policy: s for s in score(found, margin)}
    return SetRow(label, len(found), 100 * statistics.median(offs), 100 * max(offs),
                  sum((p.measured_gain > 0) != (p.predicted_gain > 0) for p in counted), len(counted),
                  sum(x <= 0.015 for x in small), len(small), 100 * by["model"].mean, 100 * by["model"].worst,
                  100 * by["always"].mean, 100 * by["always"].worst, 100 * by["vllm_default"].mean,
                  100 * by["vllm_default"].worst)


def eager_points(s: DecodeSet) -> list[Point]:
    """The eager what-if on every trace of ``s`` that its layout means measured."""
    return we.points(ROOT / s.eager, ROOT / s.means, [])


def rows(margin: float, points_of: Callable[[DecodeSet], list[Point]] = eager_points,
         sets: tuple[DecodeSet, ...] = SETS) -> tuple[list[SetRow], str]:
    """Each set's row, the held-out sets pooled, all sets pooled; and the model's label (profile, sharing)."""
    traced = {s: points_of(s) for s in sets}
    per_set = {s: [GainPoint(p.preset, p.tokens, p.measured_gain, p.predicted_gain) for p in found]
               for s, found in traced.items()}
    out = [row(s.label, found, margin) for s, found in per_set.items()]
    held = [p for s in sets if s in HELD_OUT for p in per_set[s]]
    if held:
        out.append(row("held-out sets pooled", held, margin))
    out.append(row("all sets pooled", [p for found in per_set.values() for p in found], margin))
    return out, next(iter(traced.values()))[0].profile


def _git(*args: str) -> str:
    """A git query on the checkout the model (``simulator``) is imported from: the model's commit, which differs
    from this script's when an older checkout is put first on PYTHONPATH."""
    try:
        return subprocess.run(["git", *args], cwd=MODEL_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(found: list[SetRow], label: str, recorded: list[dict[str, Any]]) -> str:
    """The table: the current model's rows, then each recorded run's."""
    head = ["| model | set | points | gain off, median / worst | signs wrong | within ±1.5 at ≤ 4 tokens | "
            "what-if regret, mean / worst | always | vLLM default |",
            "| --- | --- | ---: | --- | --- | --- | --- | --- | --- |"]

    def lines(model: str, rs: list[SetRow]) -> list[str]:
        return [f"| {model} | {r.label} | {r.points} | {r.off_median:.1f} / {r.off_worst:.1f} | "
                f"{r.signs_wrong} of {r.signs_counted} | {r.within} of {r.small} | "
                f"{r.whatif_mean:.2f} / {r.whatif_worst:.2f} | {r.always_mean:.2f} / {r.always_worst:.2f} | "
                f"{r.vllm_mean:.2f} / {r.vllm_worst:.2f} |" for r in rs]

    body = lines("this checkout", found)
    for rec in recorded:
        body += lines(f"{rec['commit']} (committed {rec['commit_date'][:10]})", [SetRow(**r) for r in rec["rows"]])
    return "\n".join([f"Model: {label}. Gains in points of the layer time; regret of multi_stream where the "
                      f"what-if's gain exceeds the margin (0.5 %).", "", *head, *body])


def load_recorded(folder: Path) -> list[dict[str, Any]]:
    """The recorded runs of ``folder`` (``--record`` files), oldest commit first."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder of recorded runs")
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return sorted(runs, key=lambda r: r["commit_date"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--margin", type=float, default=0.005, help="the policy's margin (default 0.005)")
    ap.add_argument("--record", type=Path, help="also write this checkout's rows as JSON to FILE")
    ap.add_argument("--recorded", type=Path, help="print the rows recorded in this folder's JSON files too")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)

    def report() -> str:
        recorded = load_recorded(args.recorded) if args.recorded else []
        found, label = rows(args.margin)
        dirty = "+uncommitted" if _git("status", "--porcelain", "--", "simulator") else ""
        record = {"commit": _git("rev-parse", "--short", "HEAD") + dirty,
                  "commit_date": _git("log", "-1", "--format=%cI"), "date": date.today().isoformat(), "model": label,
                  "margin": args.margin, "rows": [asdict(r) for r in found]}
        if args.record:
            args.record.write_text(json.dumps(record, indent=1) + "\n")
        return json.dumps(record, indent=1) if args.json else markdown(found, label, recorded)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
