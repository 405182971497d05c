"""Score the trace what-if's multi_stream decisions on a measured graph-mode matrix, beside the shape path's.

For every (preset or rank variant, token count) of the bench runs that has both strategies measured in graph mode
and a sequential eager trace in the trace folders (``*/traces/<preset>_t<tokens>_sequential_eager.json.gz``), the
what-if a user runs on that trace (``moesim whatif trace TRACE --aux-region moe.shared_experts --launch graph``,
block placement) predicts the multi_stream gain; where a point has traces in several folders (recorded in other
device calls), their predictions are averaged. On the same points the shape path (``moesim sweep``'s model: the
layer built from the preset's shapes) predicts it too. Both are scored as policies (regret: the measured gain of
the better strategy minus that of the chosen one) beside the trivial ones, and their 1/2/4-token gains are listed.
Nothing is fitted here: the profile is only run; the traces were recorded in other device calls than the runs.

    PYTHONPATH=. python benchmarks/decisions_traced.py --run kernels_real9 --run kernels_real9_repeat \\
        --traces calibration/measurements/h200/2026-12-03/eager_traces
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from decisions import GAIN_TOLERANCE, SMALL_TOKENS  # benchmarks/decisions.py (this script's folder is on sys.path)
from tqdm import tqdm

from calibration.fit_whatif import REGION, eager_traces, predicted_gain
from simulator.decisions import GainPoint, score, scores_table, verdict
from simulator.errors import InputError, print_or_fail
from simulator.kineto.replay import run_whatif
from simulator.profile import Profile, load_profile
from simulator.validation import gain_points, measured_gains

MEASUREMENTS = Path("calibration/measurements/h200/2026-12-03")


def traced_points(runs: list[Path], trace_folders: list[Path], profile: Profile
                  ) -> tuple[list[GainPoint], list[GainPoint]]:
    """(trace what-if points, shape path points) on the points measured in ``runs`` that have a trace."""
    measured = measured_gains(runs)
    traces: dict[tuple[str, int], list[Path]] = {}
    for folder in trace_folders:
        for key, path in eager_traces(folder).items():
            if key in measured:
                traces.setdefault(key, []).append(path)
    if not traces:
        raise InputError("no measured point has a sequential eager trace in the trace folders")
    traced = []
    for key, paths in tqdm(sorted(traces.items()), desc="what-if", disable=not sys.stderr.isatty()):
        gains = [predicted_gain(run_whatif(p, REGION, launch="graph", profile=profile, progress=False,
                                           sharing="placement")) for p in paths]
        traced.append(GainPoint(key[0], key[1], measured[key], statistics.fmean(gains)))
    shape = [p for p in gain_points(profile, runs) if (p.preset, p.tokens) in traces]
    return traced, sorted(shape, key=lambda p: (p.preset, p.tokens))


def _within(points: list[GainPoint], tokens: tuple[int, ...]) -> tuple[int, int]:
    small = [p for p in points if p.tokens in tokens]
    return sum(abs(p.predicted_gain - p.measured_gain) <= GAIN_TOLERANCE for p in small), len(small)


def markdown(traced: list[GainPoint], shape: list[GainPoint], margin: float, profile: Profile, runs: list[Path],
             folders: list[Path], table_tokens: tuple[int, ...] = SMALL_TOKENS,
             other: tuple[Path, dict[tuple[str, int], float]] | None = None) -> str:
    """The policies' scores and, at ``table_tokens``, every point's gains; ``other``: another machine start's run
    and its measured gains, listed beside."""
    tokens = sorted({p.tokens for p in traced})
    traced_scores, shape_scores = score(traced, margin), score(shape, margin)
    lines = [f"Runs: {', '.join(map(str, runs))} (graph mode; a point in several runs: the mean of their medians). "
             f"Traces: sequential eager traces in {', '.join(f'`{f}`' for f in folders)} ({len(traced)} points "
             f"at {', '.join(map(str, tokens))} tokens). Profile: {profile.describe()}. Margin {100 * margin:.1f} %. "
             "Not run on AMD hardware.", "",
             "The trace what-if (`moesim whatif trace ... --launch graph`):", "",
             *scores_table(traced_scores, "trace what-if"), "",
             *[f"- {line}" for line in verdict(traced_scores, "the trace what-if")], "",
             "The shape path on the same points:", "",
             *scores_table(shape_scores, "shape path"), "",
             *[f"- {line}" for line in verdict(shape_scores, "the shape path")], ""]
    (tw, n), (sw, _) = _within(traced, table_tokens), _within(shape, table_tokens)
    lines += [f"At {', '.join(map(str, table_tokens))} tokens: predicted gain within ±{100 * GAIN_TOLERANCE:.1f} "
              f"points of measured in {tw}/{n} (trace what-if) and {sw}/{n} (shape path)."
              + (f" Another machine start: `{other[0]}`." if other else ""), "",
              "| preset | tokens | measured gain |" + (" another start |" if other else "")
              + " trace what-if | off by (points) | shape path | off by (points) |",
              "| --- | ---: | ---: |" + (" ---: |" if other else "") + " ---: | ---: | ---: | ---: |"]
    by_shape = {(p.preset, p.tokens): p.predicted_gain for p in shape}
    for p in traced:
        if p.tokens in table_tokens:
            s = by_shape[(p.preset, p.tokens)]
            elsewhere = other[1].get((p.preset, p.tokens)) if other else None
            there = "" if other is None else " n/a |" if elsewhere is None else f" {100 * elsewhere:+.1f} % |"
            lines.append(f"| {p.preset} | {p.tokens} | {100 * p.measured_gain:+.1f} % |{there} "
                         f"{100 * p.predicted_gain:+.1f} % | {100 * (p.predicted_gain - p.measured_gain):+.1f} | "
                         f"{100 * s:+.1f} % | {100 * (s - p.measured_gain):+.1f} |")
    return "\n".join(lines)


def _folder(run: str) -> Path:
    return MEASUREMENTS / run if (MEASUREMENTS / run).is_dir() else Path(run)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True,
                    help=f"bench output folder (under {MEASUREMENTS}, or a path); repeat to pool runs")
    ap.add_argument("--traces", action="append", required=True, type=Path,
                    help="folder whose traces/ holds sequential eager traces (repeat for several)")
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--margin", type=float, default=0.005, help="gain multi_stream must predict (fraction)")
    ap.add_argument("--table-tokens", type=int, nargs="+", default=list(SMALL_TOKENS),
                    help="token counts whose points the table lists (default %(default)s)")
    ap.add_argument("--other-start", help="bench run of the same matrix on another machine start: its measured "
                                          "gains listed beside")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def report() -> str:
        profile = load_profile(args.profile)
        runs = [_folder(r) for r in args.run]
        traced, shape = traced_points(runs, args.traces, profile)
        if not args.json:
            other = None
            if args.other_start:
                folder = _folder(args.other_start)
                other = (folder, measured_gains([folder]))
            return markdown(traced, shape, args.margin, profile, runs, args.traces, tuple(args.table_tokens), other)
        return json.dumps({"profile": args.profile, "margin": args.margin,
                           "trace_whatif": [s.to_json_dict() for s in score(traced, args.margin)],
                           "shape_path": [s.to_json_dict() for s in score(shape, args.margin)],
                           "points": [vars(p) | {"shape_predicted_gain": s.predicted_gain}
                                      for p, s in zip(traced, shape, strict=True)]}, indent=1)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
