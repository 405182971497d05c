"""Kernel durations from a graph trace by position, host scaling, grouped-GEMM bytes, slow first launches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.kineto.demand import shape_cost
from simulator.kineto.events import CpuOp
from simulator.kineto.replay import run_whatif
from tests.data.kineto.synth import DEV, H200, Synth, moe_layer

PROFILE = str(Path(__file__).parent / "data" / "kineto" / "test-profile.json")
REAL = sorted(Path(__file__).resolve().parents[1].glob(
    "calibration/measurements/**/traces/deepseek_v2_lite_t1_sequential_eager.json*"))


def _graph_trace(path: Path, names: list[str], durs: list[list[float]], gap: float) -> Path:
    """Kernels only (as a graph replay's trace has them): copy c of kernel i lasts durs[c][i]."""
    events, t = [], 5000.0
    for copy in durs:
        for name, dur in zip(names, copy, strict=True):
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": DEV, "tid": 7, "ts": t, "dur": dur,
                           "args": {"device": DEV, "stream": 7, "correlation": 1}})
            t += dur + gap
    path.write_text(json.dumps({"deviceProperties": [H200], "traceEvents": events}))
    return path


NAMES = ["gate_gemm", "shared_up", "shared_down", "routed_up", "routed_down", "combine_add"]


def test_graph_durations_by_position_and_the_profiles_node_gap(moe_trace: Path, tmp_path: Path) -> None:
    graph = _graph_trace(tmp_path / "graph.json", NAMES, [[8, 20, 20, 30, 30, 4], [10, 24, 24, 34, 34, 6]], 0.8)
    r = run_whatif(moe_trace, None, launch="graph", profile=PROFILE, durations_from=graph, progress=False)
    gap = json.loads(Path(PROFILE).read_text())["host"]["node_gap_us"]["value"]
    assert gap != 0.8
    # one graph: the means (9 + 22 + 22 + 32 + 32 + 5 = 122 µs) back to back, 5 node gaps of the profile's (the
    # graph trace's 0.8 µs gaps are profiled ones: reported, not replayed)
    assert r.baseline_us == pytest.approx(122 + 5 * gap)
    assert r.traced_node_gap_us == pytest.approx(0.8)
    assert "mapped by position" in r.durations
    assert "not used" in r.to_json_dict()["sources"]["host"]


def test_graph_durations_refuse_another_kernel_sequence(moe_trace: Path, tmp_path: Path) -> None:
    swapped = [NAMES[1], NAMES[0], *NAMES[2:]]
    with pytest.raises(InputError, match="kernel sequences differ"):
        run_whatif(moe_trace, None, launch="graph", profile=PROFILE,
                   durations_from=_graph_trace(tmp_path / "g.json", swapped, [[1.0] * 6], 0.5), progress=False)
    with pytest.raises(InputError, match="whole number of copies"):
        run_whatif(moe_trace, None, launch="graph", profile=PROFILE,
                   durations_from=_graph_trace(tmp_path / "h.json", NAMES[:5], [[1.0] * 5], 0.5), progress=False)


def test_graph_durations_let_a_copy_face_a_copy_kernel(tmp_path: Path) -> None:
    """A graph may run a memcpy node as a copy kernel: the copy takes that op's duration; a kernel of the
    replayed trace at the copy's position is still refused."""
    s = Synth()
    s.launch("gemm", 10.0)
    s.launch("Memcpy DtoD (Device -> Device)", 1.0)["cat"] = "gpu_memcpy"
    s.launch("add", 2.0)
    eager = tmp_path / "eager.json"
    eager.write_text(s.dumps())
    graph = _graph_trace(tmp_path / "graph.json", ["gemm", "copy_kernel", "add"], [[10.0, 3.0, 2.0]], 0.0)
    r = run_whatif(eager, None, launch="graph", profile=PROFILE, durations_from=graph, progress=False)
    gap = json.loads(Path(PROFILE).read_text())["host"]["node_gap_us"]["value"]
    assert r.baseline_us == pytest.approx(10 + 3 + 2 + 2 * gap)  # one graph: the copy kernel's 3 µs
    misaligned = _graph_trace(tmp_path / "bad.json", ["gemm", "add", "add"], [[10.0, 2.0, 2.0]], 0.0)
    with pytest.raises(InputError, match="kernel sequences differ"):
        run_whatif(eager, None, launch="graph", profile=PROFILE, durations_from=misaligned, progress=False)


def test_host_scale_shrinks_host_bound_time(tmp_path: Path) -> None:
    s = Synth()
    for _ in range(4):
        s.launch("k", 2.0)
        s.idle(20.0)  # python between launches: the replay is host-bound
    path = tmp_path / "host.json"
    path.write_text(s.dumps())
    full = run_whatif(path, None, profile=PROFILE, progress=False)
    half = run_whatif(path, None, profile=PROFILE, host_scale=0.5, progress=False)
    # launches every 5 + 20 µs; halved: every 12.5 µs; span = 3 intervals + the last kernel's 2 µs
    assert full.baseline_us == pytest.approx(3 * 25 + 2)
    assert half.baseline_us == pytest.approx(3 * 12.5 + 2)


def test_host_scale_fitted_to_a_measured_layer_time(tmp_path: Path) -> None:
    """As above, span(scale) = 75 × scale + 2 µs over two layer calls: a measured 16 µs per layer (32 µs in
    all) takes scale (32 − 2) / 75 = 0.4; a measured time longer than the unscaled replay leaves the host as
    traced (only the profiler's slowdown is taken out)."""
    s = Synth()
    for _ in range(4):
        s.launch("k", 2.0)
        s.idle(20.0)
    doc = json.loads(s.dumps())
    doc["moesim_layers_per_trace"] = 2
    path = tmp_path / "host.json"
    path.write_text(json.dumps(doc))
    fitted = run_whatif(path, None, profile=PROFILE, measured_layer_us=16.0, progress=False)
    assert fitted.host_scale == pytest.approx(0.4, abs=1e-6)
    assert fitted.baseline_layer_us == pytest.approx(16.0, abs=1e-5)
    assert "16.000 µs per layer" in fitted.to_json_dict()["sources"]["host"]
    slower = run_whatif(path, None, profile=PROFILE, measured_layer_us=50.0, progress=False)
    assert slower.host_scale == 1.0 and slower.baseline_us == pytest.approx(77.0)
    assert any("not scaled" in note for note in slower.notes)
    with pytest.raises(InputError, match="needs --launch as-traced"):
        run_whatif(path, None, launch="graph", profile=PROFILE, measured_layer_us=16.0, progress=False)


def test_grouped_gemm_reads_only_the_groups_its_rows_can_touch() -> None:
    op = CpuOp("aten::_grouped_mm", 1, 0.0, 1.0, dims=((8, 3584), (64, 3584, 5120), (64,)),
               types=("c10::BFloat16", "c10::BFloat16", "int"))
    nbytes, flops = shape_cost(op)
    # 8 rows reach at most 8 of the 64 experts: A + 8 weight matrices + the [8, 5120] output, bf16
    assert nbytes == 2 * (8 * 3584 + 8 * 3584 * 5120 + 8 * 5120)
    assert flops == 2 * 8 * 3584 * 5120


@pytest.mark.skipif(not REAL, reason="no committed H200 traces")
def test_real_trace_with_slow_first_launch_replays_its_span() -> None:
    """The first cuBLAS launch in this trace takes ~430 µs (lazy loading); a fixed submission offset would
    replay the layer ~22% long. As traced, the replay must reproduce the traced span within 2%."""
    r = run_whatif(REAL[-1], None, profile="h200-datasheet", progress=False)
    assert r.baseline_us == pytest.approx(r.host.measured_us, rel=0.02)


def _two_layer_trace(path: Path) -> Path:
    """Two moe_layer calls back to back (kernels_real's eager trace of N = 2 calls)."""
    s = Synth()
    moe_layer(s)
    moe_layer(s)
    path.write_text(json.dumps(s.document() | {"moesim_layers_per_trace": 2}))
    return path


def test_two_layer_eager_trace_is_replayed_whole_and_divided_by_two(tmp_path: Path) -> None:
    r = run_whatif(_two_layer_trace(tmp_path / "eager2.json"), "moe.shared_experts", profile=PROFILE,
                   progress=False)
    # device-bound: 2 × (10 + 30 + 30 + 40 + 40 + 5) µs of kernels with 11 gaps of 1 µs between 12 kernels
    assert r.layers == 2
    assert r.baseline_us == pytest.approx(2 * 155 + 11)
    assert r.baseline_layer_us == pytest.approx((2 * 155 + 11) / 2)
    assert r.whatif_us is not None and r.whatif_layer_us == pytest.approx(r.whatif_us / 2)
    assert r.moved == 4 and r.instances == 2
    assert r.to_json_dict()["baseline_per_layer_us"] == pytest.approx(160.5)


def test_two_layer_eager_trace_takes_graph_durations_per_layer_position(tmp_path: Path) -> None:
    graph = _graph_trace(tmp_path / "graph.json", NAMES, [[8, 20, 20, 30, 30, 4], [10, 24, 24, 34, 34, 6]], 0.5)
    r = run_whatif(_two_layer_trace(tmp_path / "eager2.json"), None, launch="graph", profile=PROFILE,
                   durations_from=graph, progress=False)
    # both layers take the means (122 µs per layer); one graph of 12 nodes: 11 node gaps of 0.5 µs
    assert r.baseline_us == pytest.approx(2 * 122 + 11 * 0.5)
    assert r.baseline_layer_us == pytest.approx(124.75)


def test_trace_without_layer_metadata_counts_one_layer(moe_trace: Path) -> None:
    r = run_whatif(moe_trace, None, profile=PROFILE, progress=False)
    assert r.layers == 1 and r.baseline_layer_us == r.baseline_us
