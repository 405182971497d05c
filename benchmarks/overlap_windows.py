"""The overlap phase alone: how long the routing chain and the shared experts take beside each other, measured
and predicted, with the routed experts' grouped GEMMs left out.

A measured multi_stream gain at 1–4 tokens carries a layout term of several points (``layout_spread.py``): the
routed grouped GEMM's duration moves with where the buffers sit, with nothing beside it. This table leaves it
out. Per layer of a bench run's graph traces (each replay's first layer dropped, medians over the rest):

- *routing*: from the layer's first kernel to the start of its first grouped GEMM (the routing chain, beside
  the shared experts under multi_stream);
- *shared*: from the layer's first kernel to the end of the last shared-expert kernel (the aux stream's, the
  closing add excluded);
- *phase*: the later of the two, the end of the overlap phase.

Each is given for the sequential trace and the multi_stream trace as measured, and for the trace what-if's
multi_stream (``moesim whatif trace`` on the sequential trace, the multi_stream trace's aux ops moved, as
``whatif_graph_traces.py`` asks it). The phase gain is (sequential phase − multi_stream phase) / sequential
layer span: the share of the layer the overlap saves before the grouped GEMMs start, measured against
predicted.

    PYTHONPATH=. python benchmarks/overlap_windows.py calibration/measurements/h200/2026-12-03/layer_traces
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import layer_overlap as lo
import whatif_graph_traces as wg

from simulator.errors import InputError, print_or_fail
from simulator.kineto.replay import run_whatif, sharing_label

SMALL_TOKENS = (1, 2, 4)
TOLERANCE = 0.015


@dataclass(frozen=True)
class Window:
    routing_us: float
    shared_us: float


@dataclass(frozen=True)
class PhasePoint:
    preset: str
    tokens: int
    sequential: Window
    measured: Window
    predicted: Window
    sequential_span_us: float


def is_grouped_gemm(name: str) -> bool:
    return "GroupProblemShape" in name or ("grouped_gemm" in name.lower() and "prepare" not in name)


def window(starts: Sequence[float], ends: Sequence[float], names: Sequence[str], shared: Sequence[int]) -> Window:
    """One layer's window, its kernels given in sequential order (``shared``: the shared experts' positions)."""
    first = min(starts)
    grouped = next((i for i, name in enumerate(names) if is_grouped_gemm(name)), None)
    if grouped is None:
        raise InputError(f"no grouped GEMM in the layer ({len(names)} kernels)")
    return Window(starts[grouped] - first, max(ends[i] for i in shared) - first)


def median_window(windows: Sequence[Window]) -> Window:
    return Window(statistics.median(w.routing_us for w in windows), statistics.median(w.shared_us for w in windows))


def steady(layers: list, per_replay: int) -> list:
    """The layers that are not a replay's first (that one runs apart: its overlap does not happen)."""
    kept = [layer for i, layer in enumerate(layers) if per_replay < 2 or i % per_replay]
    return kept or layers


def in_order(keys: list[tuple[str, int]], layer: list[lo.Kernel]) -> list[lo.Kernel]:
    """A layer's kernels in the order of ``keys`` (the sequential layer's)."""
    by_key = lo.keyed(layer)
    return [by_key[key] for key in keys]


def measured_window(layer: list[lo.Kernel], order: Callable[[list[lo.Kernel]], list[lo.Kernel]],
                    shared: Sequence[int]) -> Window:
    ordered = order(layer)
    return window([k["start_us"] for k in ordered], [k["start_us"] + k["dur_us"] for k in ordered],
                  [k["name"] for k in ordered], shared)


def phase_points(run: Path, sharing: str = "placement") -> list[PhasePoint]:
    records = {(r["preset"], r["tokens"], r["strategy"]): r for r in lo.load_kernel_records(run)
               if r["mode"] == "graph"}
    out = []
    for (preset, tokens, strategy), seq_record in sorted(records.items()):
        ms_record = records.get((preset, tokens, "multi_stream"))
        if strategy != "sequential" or ms_record is None:
            continue
        per_replay = max(1, int(seq_record["layers"]) // lo.replays_per_trace(run / seq_record["trace"]))
        seq_layers = steady(lo.layers_of(seq_record, 1), per_replay)
        ms_layers = steady(lo.layers_of(ms_record, 1), per_replay)
        shared = wg.aux_positions(seq_layers[0], ms_layers[0])
        if not shared:
            continue
        seq_keys = list(lo.keyed(seq_layers[0]))
        sequential = median_window([measured_window(layer, list, shared) for layer in seq_layers])
        measured = median_window([measured_window(layer, partial(in_order, seq_keys), shared) for layer in ms_layers])
        result = run_whatif(run / seq_record["trace"], None, launch="graph", progress=False,
                            aux_kernels=wg.ranges(shared), join_after_kernel=str(len(seq_keys) - 2), sharing=sharing)
        assert result.whatif is not None
        size = len(seq_keys)
        ranked = sorted(result.whatif.kernels, key=lambda k: k.index)  # program order: the trace's GPU op order
        periods = [ranked[j * size:(j + 1) * size] for j in range(1, len(ranked) // size)]
        names = [key[0] for key in seq_keys]
        predicted = median_window([window([k.start_us for k in ks], [k.end_us for k in ks], names, shared)
                                   for ks in periods])
        out.append(PhasePoint(preset, tokens, sequential, measured, predicted,
                              statistics.median(map(lo.span, seq_layers))))
    if not out:
        raise InputError(f"{run}: no point with sequential and multi_stream graph traces")
    return out


def off(p: PhasePoint, part: str) -> float:
    """Predicted minus measured multi_stream window ``part`` (routing or shared), in points of the layer."""
    return (getattr(p.predicted, part) - getattr(p.measured, part)) / p.sequential_span_us


def summary(points: list[PhasePoint], part: str, label: str) -> str:
    offs = [off(p, part) for p in points]
    small = [off(p, part) for p in points if p.tokens in SMALL_TOKENS]
    return (f"{label}: predicted − measured median {100 * statistics.median(offs):+.1f}, worst "
            f"{100 * max(offs, key=abs):+.1f} points of the layer; within ±{100 * TOLERANCE:.1f} at 1/2/4 tokens: "
            f"{sum(abs(x) <= TOLERANCE for x in small)} of {len(small)}")


def markdown(points: list[PhasePoint], sharing: str) -> str:
    lines = [f"The trace what-if{sharing_label(sharing)}.",
             f"- {summary(points, 'routing_us', 'routing chain beside the shared experts')}.",
             f"- {summary(points, 'shared_us', 'shared experts beside the routing')}.", "",
             "| preset | tokens | routing µs: alone / beside, measured / predicted | shared µs: alone / beside, "
             "measured / predicted | routing off by | shared off by (points) |",
             "| --- | ---: | --- | --- | ---: | ---: |"]
    for p in points:
        alone = p.sequential.routing_us - p.sequential.shared_us  # the sequential layer runs the shared first
        lines.append(
            f"| {p.preset} | {p.tokens} | {alone:.1f} / {p.measured.routing_us:.1f} / {p.predicted.routing_us:.1f} | "
            f"{p.sequential.shared_us:.1f} / {p.measured.shared_us:.1f} / {p.predicted.shared_us:.1f} | "
            f"{100 * off(p, 'routing_us'):+.1f} | {100 * off(p, 'shared_us'):+.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", type=Path, default=lo.DEFAULT_RUN, help="bench run folder with graph traces")
    ap.add_argument("--sharing", choices=("placement", "profile"), default="placement",
                    help="the what-if's sharing model (moesim whatif trace --sharing; default: placement)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(phase_points(args.run, args.sharing), args.sharing))


if __name__ == "__main__":
    sys.exit(main())
