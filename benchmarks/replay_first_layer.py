"""The first layer of a multi-stream graph replay, and what a replay pays once.

From the layer traces (bench runs with graph traces of both strategies): per place of a layer in its replay (a
graph of ``layers_per_replay`` layer calls), the multi_stream layer's gain over the sequential layer at the same
place (GPU spans, medians over the traced layers; each trace's first replay dropped), how long the routing
chain's second kernel (the fp32 router) waits after its first (the cast) ends, and the gap before the layer's
last kernel (the add that joins both branches) after everything else ended.

With ``--probe RUN`` (``kernels_real.replay_length_probe`` runs, timed without a profiler): per point, each
strategy's µs per layer and µs once per replay (the line through graphs of several lengths), the multi_stream
excess of the latter (``calibration.fit_replay``: the figure ``host.graph_first_fork_us`` takes), and the gain
a graph of W layers measures against the steady gain of a long one.

    PYTHONPATH=. python benchmarks/replay_first_layer.py [RUN ...] [--probe RUN ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from calibration import layer_traces as lo
from calibration.fit_replay import first_fork_excess, first_fork_figure, load_replay_lengths, point_pairs
from simulator.errors import InputError, print_or_fail
from simulator.validation import load_cases

MEASUREMENTS = Path(__file__).resolve().parents[1] / "calibration" / "measurements"
DEFAULT_RUNS = (MEASUREMENTS / "h200" / "2026-12-03" / "layer_traces",
                MEASUREMENTS / "h200" / "2026-12-03" / "layer_traces_heldout",
                MEASUREMENTS / "h100" / "2026-12-05" / "layer_traces_small",
                MEASUREMENTS / "h100" / "2026-12-06" / "layer_traces_unseen")


def _span(layer: list[lo.Kernel]) -> float:
    return max(k["start_us"] + k["dur_us"] for k in layer) - min(k["start_us"] for k in layer)


def _end(kernel: lo.Kernel) -> float:
    return kernel["start_us"] + kernel["dur_us"]


def traced_points(run: Path, min_per_replay: int) -> Iterator[tuple[int, list[list[lo.Kernel]], list[list[lo.Kernel]]]]:
    """Per point of ``run`` with both strategies traced in graphs of at least ``min_per_replay`` layers a replay:
    its layers a replay and its sequential and multi_stream layers (each trace's first replay dropped)."""
    records = {(r["preset"], r["tokens"], r["strategy"]): r for r in lo.load_kernel_records(run)
               if r["mode"] == "graph"}
    timed = {(c["preset"], c["tokens"], c["strategy"]): c for c in load_cases(run, eager_rerun=False)
             if c.get("mode") == "graph"}
    for (preset, tokens, strategy), record in sorted(records.items()):
        seq_record = records.get((preset, tokens, "sequential"))
        per = int(timed.get((preset, tokens, strategy), {}).get("layers_per_replay") or 0)
        if strategy == "multi_stream" and seq_record is not None and per >= min_per_replay:
            yield per, lo.layers_of(seq_record, 1)[per:], lo.layers_of(record, 1)[per:]


def places(run: Path) -> dict[tuple[int, int], dict[str, list[float]]]:
    """(layers per replay, place) → per traced multi_stream layer: gain (%) over the sequential layers at that
    place, the router's wait after the cast (µs), and the join gap (µs)."""
    out: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for per, seq, ms in traced_points(run, 2):
        order = list(lo.keyed(seq[0]))
        for i, layer in enumerate(ms):
            place = i % per
            seq_span = statistics.median(_span(s) for j, s in enumerate(seq) if j % per == place)
            by_key = lo.keyed(layer)
            aux = by_key[order[0]]["stream"]  # the shared experts' first GEMM leads the sequential layer
            routing = [by_key[key] for key in order[:-1] if by_key[key]["stream"] != aux]
            cell = out[(per, place)]
            cell["gain"].append(100 * (1 - _span(layer) / seq_span))
            if len(routing) > 1:
                cell["router_wait"].append(routing[1]["start_us"] - _end(routing[0]))
            cell["join"].append(layer[-1]["start_us"] - max(_end(k) for k in layer[:-1]))
    if not out:
        raise InputError(f"{run}: no point with sequential and multi_stream graph traces of 2 or more layers a replay")
    return out


def first_layer_excess(run: Path) -> list[float]:
    """Per point with 3 or more layers a replay: how much longer the first layer of a replay runs than the later
    ones in the multi_stream traces, less the same in the sequential traces (µs; GPU spans, medians)."""

    def excess(layers: list[list[lo.Kernel]], per: int) -> float:
        first = statistics.median(_span(x) for i, x in enumerate(layers) if i % per == 0)
        return first - statistics.median(_span(x) for i, x in enumerate(layers) if i % per > 0)

    return [excess(ms, per) - excess(seq, per) for per, seq, ms in traced_points(run, 3)]


def trace_table(runs: list[Path]) -> list[str]:
    lines = ["| run | place in the replay | layers | multi_stream gain over sequential, median | router's wait after "
             "the cast, median (µs) | gap before the joining add, median (µs) |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for run in runs:
        for (per, place), cell in sorted(places(run).items()):
            lines.append(f"| {run.name} ({run.parent.parent.name}) | {place + 1} of {per} | {len(cell['gain'])} | "
                         f"{statistics.median(cell['gain']):+.1f} % | {statistics.median(cell['router_wait']):.2f} | "
                         f"{statistics.median(cell['join']):.2f} |")
    lines += ["", "| run | points | first layer's excess over the later ones, multi_stream less sequential: median "
              "(p10 / p90), µs |", "| --- | ---: | --- |"]
    for run in runs:
        excess = sorted(first_layer_excess(run))
        if excess:
            lines.append(f"| {run.name} ({run.parent.parent.name}) | {len(excess)} | "
                         f"{statistics.median(excess):+.1f} ({excess[len(excess) // 10]:+.1f} / "
                         f"{excess[(9 * len(excess)) // 10]:+.1f}) |")
    return lines


def probe_table(runs: list[Path]) -> list[str]:
    lines = ["| run (GPU) | preset | tokens | W | sequential µs/layer, once | multi_stream µs/layer, once | "
             "excess once (µs) | gain, graph of W layers | steady gain |",
             "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: |"]
    figures = []
    for run in runs:
        records, env = load_replay_lengths(run)
        gpu = env.get("device_name", "unnamed GPU")
        excess = first_fork_excess(records)
        for point, (seq, ms) in point_pairs(records).items():
            shortest = 1 - ms["median_us_per_replay"][0] / seq["median_us_per_replay"][0]
            lines.append(f"| {run.name} ({gpu}) | {point[0]} | {point[1]} | {seq['layers_per_replay'][0]} | "
                         f"{seq['per_layer_us']:.1f}, {seq['intercept_us']:+.1f} | "
                         f"{ms['per_layer_us']:.1f}, {ms['intercept_us']:+.1f} | {excess[point]:+.1f} | "
                         f"{100 * shortest:+.1f} % | {100 * (1 - ms['per_layer_us'] / seq['per_layer_us']):+.1f} % |")
        figure = first_fork_figure(records, run.name)
        figures.append(f"{run.name} ({gpu}): {figure['value']:.2f} µs — {figure['source']}.")
    return [*lines, "", *figures]


def markdown(runs: list[Path], probes: list[Path]) -> str:
    lines = ["Layer traces: GPU spans of each traced layer, medians; gain against the sequential layers at the same "
             "place. Not run on AMD hardware.", "", *trace_table(runs)]
    if probes:
        lines += ["", "Replay-length runs (CUDA events, no profiler): µs per replay = once + N × per layer, fitted "
                  "over graphs of N = W, 2W, 4W layer calls (W weight sets). Not run on AMD hardware.", "",
                  *probe_table(probes)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="bench runs with graph traces of both strategies (default: two per GPU)")
    ap.add_argument("--probe", nargs="+", type=Path, default=[], help="kernels_real.replay_length_probe runs")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs, args.probe))


if __name__ == "__main__":
    sys.exit(main())
