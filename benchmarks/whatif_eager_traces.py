"""The trace what-if as a user runs it: a sequential *eager* trace (``record_shapes``), the shared experts' range
moved to an aux stream, ``--launch graph``; scored against the measured multi_stream gain.

A bench run of sequential eager traces (``bash calibration/gpu_session.sh eagertraces``: the layout-means points
at 1/2/4/16 tokens, traced, not timed) gives per preset and token count the trace; the what-if is
``moesim whatif trace TRACE --aux-region moe.shared_experts --launch graph`` (kernel durations as traced, or
``--durations-from`` the sequential graph trace of the same point in ``--graph-run``). Unlike a graph-only trace,
every kernel here carries its operator's input shapes, so its bytes and flops (``simulator.kineto.demand``). The
measured gains come from ``--reference`` (default: the layout means, each point's mean over four memory
layouts). Nothing is fitted to these runs.

    PYTHONPATH=. python benchmarks/whatif_eager_traces.py [RUN] [--graph-run RUN ...] [--decisions]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from whatif_graph_traces import Point, decisions_markdown, markdown

from calibration.fit_whatif import REGION, eager_whatifs, predicted_gain, sequential_traces
from simulator.errors import InputError, print_or_fail
from simulator.kineto.replay import sharing_label

MEASUREMENTS = Path(__file__).resolve().parents[1] / "calibration" / "measurements" / "h200" / "2026-12-03"
DEFAULT_RUN = MEASUREMENTS / "eager_traces"
DEFAULT_REFERENCE = MEASUREMENTS / "layout_means"


def graph_traces(runs: list[Path]) -> dict[tuple[str, int], Path]:
    """(preset, tokens) → a sequential graph trace of the same point in ``runs`` (the first run that has it)."""
    found: dict[tuple[str, int], Path] = {}
    for run in reversed(runs):
        found.update(sequential_traces(run, "graph"))
    return found


def points(run: Path, reference: Path, graph_runs: list[Path], sharing: str = "placement") -> list[Point]:
    """The what-if on every eager trace of ``run`` whose point ``reference`` measured (and, with ``graph_runs``,
    whose graph trace one of them has: durations from it)."""
    durations = graph_traces(graph_runs) if graph_runs else None
    out = [Point(key[0], key[1], REGION, measured, predicted_gain(result),
                 result.profile.describe() + sharing_label(sharing)
                 + ("; kernel durations from the sequential graph traces" if graph_runs else
                    "; kernel durations as traced (eager)"))
           for key, measured, result in eager_whatifs(run, reference, sharing=sharing, durations=durations)]
    if not out:
        raise InputError(f"{run}: no eager trace of a point {reference} measured")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", type=Path, default=DEFAULT_RUN,
                    help=f"bench run with sequential eager traces (default {DEFAULT_RUN})")
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                    help=f"run whose timings give the measured gains (default {DEFAULT_REFERENCE}: layout means)")
    ap.add_argument("--graph-run", type=Path, action="append", default=[],
                    help="bench run(s) with sequential graph traces of the same points: kernel durations from "
                         "them (moesim whatif trace --durations-from); points without one are left out")
    ap.add_argument("--sharing", choices=("placement", "profile"), default="placement",
                    help="the what-if's sharing model (moesim whatif trace --sharing; default: placement)")
    ap.add_argument("--decisions", action="store_true",
                    help="print the what-if's decisions scored as a policy (regret) instead of the points")
    ap.add_argument("--margin", type=float, default=0.005, help="--decisions: the policy's margin (default 0.005)")
    args = ap.parse_args(argv)

    def report() -> str:
        found = points(args.run, args.reference, args.graph_run, args.sharing)
        return decisions_markdown(found, args.margin) if args.decisions else \
            markdown(found, "measured gain (reference run)")
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
