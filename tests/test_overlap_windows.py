"""``benchmarks/overlap_windows.py``: a layer's routing and shared windows from hand-made kernels, and the table
over the committed layer traces (measured windows checked against the kernel records they come from)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "layer_traces"


def test_window_of_a_hand_made_layer() -> None:
    """Shared GEMMs at positions 0-1 (10-30 µs), routing 2-3, then the grouped GEMM at 45 µs: routing window 45 -
    10 = 35, shared window 30 - 10 = 20, the shared experts start 2 µs before the routing chain (10 - 12); a
    replay's first layer is dropped."""
    script = load_benchmark("overlap_windows")
    names = ["nvjet_gate_up", "nvjet_down", "router", "topk", "cutlass GroupProblemShape", "add"]
    starts, ends = [10.0, 20.0, 12.0, 18.0, 45.0, 60.0], [20.0, 30.0, 18.0, 25.0, 58.0, 61.0]
    window = script.window(starts, ends, names, [0, 1])
    assert (window.routing_us, window.shared_us, window.fork_us) == (35.0, 20.0, -2.0)
    assert script.steady(["r0a", "r0b", "r1a", "r1b"], 2) == ["r0b", "r1b"]
    with pytest.raises(Exception, match="no grouped GEMM"):
        script.window(starts, ends, ["x"] * 6, [0])


def test_over_the_layer_traces() -> None:
    script = load_benchmark("overlap_windows")
    points = script.phase_points(RUN)
    lo = load_benchmark("layer_overlap")
    record = next(r for r in lo.load_kernel_records(RUN)
                  if (r["preset"], r["tokens"], r["strategy"], r["mode"]) == ("deepseek_v3", 2, "sequential", "graph"))
    layers = script.steady(lo.layers_of(record, 1), 3)
    point = next(p for p in points if (p.preset, p.tokens) == ("deepseek_v3", 2))
    grouped = [min(k["start_us"] for k in layer if script.is_grouped_gemm(k["name"]))
               - min(k["start_us"] for k in layer) for layer in layers]
    assert point.sequential.routing_us == pytest.approx(statistics.median(grouped))
    assert all(p.predicted.routing_us > 0 and p.measured.routing_us > 0 for p in points)
    assert "routing chain beside the shared experts" in script.markdown(points, "placement")
