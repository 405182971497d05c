"""The overlap phase alone: how much longer the routing chain and the shared experts take beside each other than
alone, measured and predicted, with the routed experts' grouped GEMMs left out.

A measured multi_stream gain at 1–4 tokens carries a layout term of several points (``layout_spread.py``): the
routed grouped GEMM's duration moves with where the buffers sit, with nothing beside it. This table leaves it
out. Per layer of a bench run's graph traces (each replay's first layer dropped, medians over the rest):

- *routing*: from the layer's first kernel to the start of its first grouped GEMM; alone, that is the
  sequential layer's less its shared experts (which run first there); under multi_stream, the routing chain
  beside the shared experts;
- *shared*: from the layer's first kernel to the end of the last shared-expert kernel.

The **extension** of each is its multi_stream window minus its window alone, in points of the sequential layer:
what running beside the other chain cost it. Measured: the multi_stream trace against the sequential trace.
Predicted: the trace what-if (``moesim whatif trace`` on the sequential trace, the multi_stream trace's aux ops
moved, as ``whatif_graph_traces.py`` asks it) against its own baseline replay. Taking both sides against their
own sequential layer cancels what they share, e.g. the profiled traces' wider gaps between graph nodes (0.42
µs against the profile's 0.26 µs; VALIDATION.md, "Profiled graph replays are not the timed ones").

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

from calibration.layer_traces import is_grouped_gemm
from simulator.errors import InputError, print_or_fail
from simulator.kineto.replay import run_whatif, sharing_label
from simulator.result import SimResult

SMALL_TOKENS = (1, 2, 4)
TOLERANCE = 0.015


@dataclass(frozen=True)
class Window:
    """One layer's windows (µs after its first kernel) and where its shared experts' first kernel starts
    against the routing chain's first (its fork offset)."""

    routing_us: float
    shared_us: float
    fork_us: float = 0.0


@dataclass(frozen=True)
class PhasePoint:
    """One point's windows (µs): measured sequential / multi_stream, the what-if's baseline / multi_stream."""

    preset: str
    tokens: int
    sequential: Window
    measured: Window
    baseline: Window
    predicted: Window
    sequential_span_us: float

    def extension(self, part: str, side: str) -> float:
        """How much longer ``part`` (routing_us or shared_us) took beside the other chain than alone, measured or
        predicted (``side``), in points of the sequential layer."""
        alone, beside = (self.sequential, self.measured) if side == "measured" else (self.baseline, self.predicted)
        solo = alone.routing_us - alone.shared_us if part == "routing_us" else alone.shared_us
        return (getattr(beside, part) - solo) / self.sequential_span_us



def window(starts: Sequence[float], ends: Sequence[float], names: Sequence[str], shared: Sequence[int]) -> Window:
    """One layer's window, its kernels given in sequential order (``shared``: the shared experts' positions)."""
    first = min(starts)
    grouped = next((i for i, name in enumerate(names) if is_grouped_gemm(name)), None)
    if grouped is None:
        raise InputError(f"no grouped GEMM in the layer ({len(names)} kernels)")
    routing = next(i for i in range(len(names)) if i not in shared)
    return Window(starts[grouped] - first, max(ends[i] for i in shared) - first, starts[shared[0]] - starts[routing])


def median_window(windows: Sequence[Window]) -> Window:
    return Window(*(statistics.median(getattr(w, part) for w in windows)
                    for part in ("routing_us", "shared_us", "fork_us")))


def steady(layers: list, per_replay: int) -> list:
    """The layers that are not a replay's first (that one runs apart: its branches start in another order)."""
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


def simulated_window(result: SimResult, names: list[str], shared: Sequence[int]) -> Window:
    """The median window over a replay's periods (the first dropped), its kernels in program order, which is
    the trace's GPU op order."""
    size = len(names)
    ranked = sorted(result.kernels, key=lambda k: k.index)
    periods = [ranked[j * size:(j + 1) * size] for j in range(1, len(ranked) // size)]
    return median_window([window([k.start_us for k in ks], [k.end_us for k in ks], names, shared) for ks in periods])


def phase_points(run: Path, sharing: str = "placement") -> list[PhasePoint]:
    """Per (preset, tokens) of ``run`` with both strategies traced in graph mode: the measured windows of its
    sequential and multi_stream traces and the what-if's, on the sequential trace with the multi_stream trace's
    aux ops moved (``sharing``: the what-if's sharing model)."""
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
        names = [key[0] for key in seq_keys]
        out.append(PhasePoint(preset, tokens, sequential, measured,
                              simulated_window(result.baseline, names, shared),
                              simulated_window(result.whatif, names, shared),
                              statistics.median(map(lo.span, seq_layers))))
    if not out:
        raise InputError(f"{run}: no point with sequential and multi_stream graph traces")
    return out


def off(p: PhasePoint, part: str) -> float:
    """Predicted minus measured extension of ``part`` (routing_us or shared_us), in points of the layer."""
    return p.extension(part, "predicted") - p.extension(part, "measured")


def summary(points: list[PhasePoint], part: str, label: str) -> str:
    offs = [off(p, part) for p in points]
    small = [off(p, part) for p in points if p.tokens in SMALL_TOKENS]
    return (f"{label}: predicted − measured median {100 * statistics.median(offs):+.1f}, worst "
            f"{100 * max(offs, key=abs):+.1f} points of the layer; within ±{100 * TOLERANCE:.1f} at 1/2/4 tokens: "
            f"{sum(abs(x) <= TOLERANCE for x in small)} of {len(small)}")


def fork_summary(points: list[PhasePoint]) -> str:
    """Where the shared experts' first kernel starts against the routing chain's first, under multi_stream."""
    measured = [p.measured.fork_us for p in points]
    predicted = [p.predicted.fork_us for p in points]
    return (f"the shared experts' first kernel starts after the routing chain's first by: measured median "
            f"{statistics.median(measured):+.2f} µs (from {min(measured):+.2f} to {max(measured):+.2f}), "
            f"predicted median {statistics.median(predicted):+.2f} µs")


def markdown(points: list[PhasePoint], sharing: str) -> str:
    lines = [f"The trace what-if{sharing_label(sharing)}. Extension: the window beside the other chain minus the "
             "window alone, in points of the sequential layer.",
             f"- {summary(points, 'routing_us', 'routing chain beside the shared experts, extension')}.",
             f"- {summary(points, 'shared_us', 'shared experts beside the routing, extension')}.",
             f"- {fork_summary(points)}.", "",
             "| preset | tokens | routing µs alone → beside: measured / predicted | routing extension measured / "
             "predicted | shared µs alone → beside: measured / predicted | shared extension measured / predicted |",
             "| --- | ---: | --- | --- | --- | --- |"]
    for p in points:
        routing = _cells(p, "routing_us", p.sequential.routing_us - p.sequential.shared_us,
                         p.baseline.routing_us - p.baseline.shared_us)
        shared = _cells(p, "shared_us", p.sequential.shared_us, p.baseline.shared_us)
        lines.append(f"| {p.preset} | {p.tokens} | {routing} | {shared} |")
    return "\n".join(lines)


def _cells(p: PhasePoint, part: str, alone_measured: float, alone_predicted: float) -> str:
    """One window's two table cells: alone → beside, measured / predicted; its extensions."""
    return (f"{alone_measured:.1f} → {getattr(p.measured, part):.1f} / {alone_predicted:.1f} → "
            f"{getattr(p.predicted, part):.1f} | {100 * p.extension(part, 'measured'):+.1f} / "
            f"{100 * p.extension(part, 'predicted'):+.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", type=Path, default=lo.DEFAULT_RUN, help="bench run folder with graph traces")
    ap.add_argument("--sharing", choices=("placement", "profile"), default="placement",
                    help="the what-if's sharing model (moesim whatif trace --sharing; default: placement)")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(phase_points(args.run, args.sharing), args.sharing))


if __name__ == "__main__":
    sys.exit(main())
