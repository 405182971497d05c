"""The trace what-if on sequential CUDA-graph traces alone, against the multi_stream layer measured beside them.

A bench run traced with both strategies in graph mode (``--trace-timed-graphs``, e.g. the 2026-12-03 layer traces
at 1–16 tokens) gives, per preset and token count, the sequential graph trace to ask the what-if about and the
multi_stream trace that says which GPU ops the real layer put on the aux stream. Those ops' positions in the
sequential layer go to ``moesim whatif trace --aux-kernels``, with the main stream joining before the layer's
last op (the shared-output add), ``--launch graph``, the profile matched to the traced GPU. Nothing is fitted
to these runs: the table compares the predicted multi_stream gain with the measured one (medians of
interleaved replays, ``cases.json``).

The what-if runs with block placement, ``moesim whatif trace``'s default; ``--sharing profile`` asks it with the
profile's fitted sharing form instead. ``--reference RUN`` takes the measured gains from another run (the layout
means); ``--decisions`` scores the what-if as a multi_stream policy over all the runs given.

A graph replay records no operator shapes, so the graph trace alone leaves every kernel's bytes unknown: its GEMMs
draw no HBM in the model and the latency-bound kernels beside them are not slowed by it. ``--eager DIR`` asks the
what-if as ``moesim whatif trace --help`` tells a CUDA-graph user to: the point's sequential *eager* trace (shapes
recorded: DIR/traces/PRESET_tTOKENS_sequential_eager.json.gz) with ``--launch graph`` and ``--durations-from``
the graph trace (the graph replay's kernel durations, by position); points without an eager trace are left out.

    PYTHONPATH=. python benchmarks/whatif_graph_traces.py calibration/measurements/h200/2026-12-03/layer_traces
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import layer_overlap as lo

from simulator.decisions import GainPoint, score, scores_table, verdict
from simulator.errors import InputError, print_or_fail
from simulator.kineto.replay import run_whatif, sharing_label
from simulator.validation import measured_gains

DEFAULT_RUN = lo.DEFAULT_RUN


@dataclass(frozen=True)
class Point:
    preset: str
    tokens: int
    aux_kernels: str
    measured_gain: float
    predicted_gain: float
    profile: str


def ranges(positions: list[int]) -> str:
    """``[0, 1, 2, 5, 6]`` → ``0-2,5-6``."""
    out, start = [], positions[0]
    for prev, cur in zip(positions, [*positions[1:], None], strict=True):
        if cur != prev + 1:
            out.append(f"{start}-{prev}")
            start = cur
    return ",".join(out)


def aux_positions(sequential: list[lo.Kernel], multi_stream: list[lo.Kernel]) -> list[int]:
    """Positions in the sequential layer of the ops the multi_stream layer ran on its aux stream (the layer's
    last op, the add that joins them, excluded)."""
    aux = lo.aux_stream(multi_stream)
    on_aux = {key for key, k in lo.keyed(multi_stream).items() if k["stream"] == aux}
    keys = list(lo.keyed(sequential))
    return [i for i, key in enumerate(keys[:-1]) if key in on_aux]


def points(run: Path, sharing: str = "placement", reference: Path | None = None,
           profile: str | None = None, eager: Path | None = None) -> list[Point]:
    """The what-if on each sequential graph trace of ``run``; measured gains from ``run``'s timings, or from
    ``reference`` (a run of the same points, e.g. the layout means of ``kernels_real.layout_probe``: the mean of
    its records' medians per strategy), only the points it measured; ``profile``: a profile name (default: the
    shipped one matching the traced GPU); ``eager``: a folder of the points' sequential eager traces, asked with
    the graph trace's durations (the module docstring), only the points it traced."""
    records = {(r["preset"], r["tokens"], r["strategy"]): r for r in lo.load_kernel_records(run)
               if r["mode"] == "graph"}
    if not (run / "cases.json").is_file():
        raise InputError(f"{run}: no cases.json (the timed medians)")
    measured = measured_gains([reference if reference is not None else run])
    out = []
    for (preset, tokens, strategy), seq_record in sorted(records.items()):
        ms_record = records.get((preset, tokens, "multi_stream"))
        if strategy != "sequential" or ms_record is None or (preset, tokens) not in measured:
            continue
        seq_layer, ms_layer = lo.layers_of(seq_record, 1)[0], lo.layers_of(ms_record, 1)[0]
        positions = aux_positions(seq_layer, ms_layer)
        graph_trace = run / seq_record["trace"]
        eager_trace = eager / "traces" / f"{preset}_t{tokens}_sequential_eager.json.gz" if eager else None
        if not positions or (eager_trace is not None and not eager_trace.is_file()):
            continue
        spec = ranges(positions)
        result = run_whatif(eager_trace or graph_trace, None, launch="graph", progress=False, aux_kernels=spec,
                            join_after_kernel=str(len(seq_layer) - 2), sharing=sharing, profile=profile,
                            durations_from=graph_trace if eager_trace is not None else None)
        out.append(Point(preset, tokens, spec, measured[(preset, tokens)],
                         1 - (result.whatif_layer_us or 0.0) / result.baseline_layer_us,
                         result.profile.describe() + sharing_label(sharing)))
    if not out:
        raise InputError(f"{run}: no point with sequential and multi_stream graph traces and timings"
                         + (f" that {reference} measured too" if reference is not None else "")
                         + (f" and an eager trace in {eager}" if eager is not None else ""))
    return out


def markdown(found: list[Point], measured: str = "measured gain") -> str:
    """The table; ``measured`` names the measured column (e.g. the layout mean of a reference run)."""
    offs = [abs(p.predicted_gain - p.measured_gain) for p in found]
    wrong = [p for p in found if abs(p.measured_gain) > 0.01 and (p.measured_gain > 0) != (p.predicted_gain > 0)]
    small = [abs(p.predicted_gain - p.measured_gain) for p in found if p.tokens <= 4]
    lines = [f"Profile: {found[0].profile}. Gain off by (points): median {100 * statistics.median(offs):.1f}, "
             f"worst {100 * max(offs):.1f}; sign wrong where |measured gain| > 1 %: {len(wrong)} of "
             f"{sum(abs(p.measured_gain) > 0.01 for p in found)}; within ±1.5 points at ≤ 4 tokens: "
             f"{sum(x <= 0.015 for x in small)} of {len(small)}.", "",
             f"| preset | tokens | aux ops (positions) | {measured} | what-if gain | off by (points) |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    lines += [f"| {p.preset} | {p.tokens} | {p.aux_kernels} | {100 * p.measured_gain:+.1f} % | "
              f"{100 * p.predicted_gain:+.1f} % | {100 * (p.predicted_gain - p.measured_gain):+.1f} |" for p in found]
    return "\n".join(lines)


def decisions_markdown(found: list[Point], margin: float) -> str:
    """The what-if as a policy (multi_stream where its predicted gain exceeds ``margin``), its regret against
    the trivial policies' on the measured gains (``simulator.decisions``)."""
    gains = [GainPoint(p.preset, p.tokens, p.measured_gain, p.predicted_gain) for p in found]
    scores = score(gains, margin)
    return "\n".join([f"The trace what-if as a policy: multi_stream where its predicted gain exceeds "
                      f"{100 * margin:.1f} % ({len(gains)} points; profile: {found[0].profile}).", "",
                      *scores_table(scores, "what-if"), "", *verdict(scores, "the what-if")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="*", type=Path, default=[DEFAULT_RUN],
                    help=f"bench run folders (default {DEFAULT_RUN})")
    ap.add_argument("--sharing", choices=("placement", "profile"), default="placement",
                    help="the what-if's sharing model (moesim whatif trace --sharing; default: placement)")
    ap.add_argument("--reference", type=Path,
                    help="take the measured gains from this run instead (e.g. calibration/measurements/h200/"
                         "2026-12-03/layout_means: each point's mean over four memory layouts)")
    ap.add_argument("--decisions", action="store_true",
                    help="print the what-if's decisions scored as a policy (regret) instead of the points")
    ap.add_argument("--margin", type=float, default=0.005, help="--decisions: the policy's margin (default 0.005)")
    ap.add_argument("--profile", help="the what-if's profile (default: the shipped one matching the traced GPU)")
    ap.add_argument("--eager", type=Path,
                    help="a folder of the points' sequential eager traces (shapes): ask the what-if on those with the "
                         "graph traces' durations, as moesim whatif trace --help says for CUDA graphs")
    args = ap.parse_args(argv)
    label = "measured gain" if args.reference is None else "measured gain (reference run)"

    def report() -> str:
        if args.eager is not None and not args.eager.is_dir():
            raise InputError(f"--eager {args.eager}: no such folder")
        found = [p for run in args.run for p in points(run, args.sharing, args.reference, args.profile, args.eager)]
        return decisions_markdown(found, args.margin) if args.decisions else markdown(found, label)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
