"""Kineto import: streaming reader, robustness, host program, demand; baseline replay of hand-built traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.kineto.demand import block_warps, op_family, resident_blocks, sm_fraction
from simulator.kineto.events import DeviceProps, GpuOp
from simulator.kineto.reader import read_trace
from simulator.kineto.replay import run_whatif
from tests.data.kineto.synth import GAP, LATENCY, Synth, moe_layer

PROFILE = str(Path(__file__).parent / "data" / "kineto" / "test-profile.json")


def _write(tmp_path: Path, s: Synth, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(s.dumps())
    return path


def _replay(path: Path, **kw) -> dict:
    return run_whatif(path, None, profile=PROFILE, progress=False, **kw).to_json_dict()


def test_reader_keeps_typed_records(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    trace = read_trace(_write(tmp_path, s), progress=False)
    assert len(trace.gpu_ops) == 6 and len(trace.host_calls) == 6
    assert [r.name for r in trace.ranges] == ["moe.gate", "moe.shared_experts", "moe.routed_experts"]
    assert trace.devices[0].num_sms == 132
    first = trace.gpu_ops[0]
    assert (first.grid, first.block, first.regs, first.stream) == ((8, 1, 1), (128, 1, 1), 32, 7)
    assert trace.flows == []  # every kernel names its correlation: flows are only kept to stand in for it


def test_gzip_reads_the_same(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    plain = _write(tmp_path, s)
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_trace(packed, progress=False).gpu_ops == read_trace(plain, progress=False).gpu_ops


def test_host_bound_eager_trace_replays_exactly(tmp_path: Path) -> None:
    s = Synth(call_us=5.0)
    for i in range(10):
        s.launch(f"tiny{i}", 2.0)
        s.idle(3.0)  # python overhead between launches: must be replayed too
    # kernel i starts at 3 + 8 i (8 µs per host iteration), the last ends at 3 + 72 + 2
    assert s.span() == pytest.approx(74.0)
    out = _replay(_write(tmp_path, s))
    assert out["measured_us"] == pytest.approx(74.0)
    assert out["baseline_us"] == pytest.approx(74.0)
    assert out["kernels"] == 10


def test_gpu_bound_trace_replays_exactly(tmp_path: Path) -> None:
    s = Synth()
    for i in range(6):
        s.launch(f"big{i}", 20.0)
    assert s.span() == pytest.approx(6 * 20.0 + 5 * GAP)
    out = _replay(_write(tmp_path, s))
    assert out["baseline_us"] == pytest.approx(125.0)
    assert out["kernel_gap_us"] == pytest.approx(GAP)


def test_sync_wait_is_recomputed_not_replayed(tmp_path: Path) -> None:
    s = Synth()
    s.launch("a", 50.0)
    s.sync()
    s.launch("b", 10.0)
    # a: 3..53; sync returns at 55 (its traced wait); b's call at 55, starts at 58, ends 68: span 65
    assert s.span() == pytest.approx(65.0)
    assert _replay(_write(tmp_path, s))["baseline_us"] == pytest.approx(65.0)


def test_cross_stream_wait_from_cuda_sync(tmp_path: Path) -> None:
    s = Synth()
    s.launch("producer", 50.0, stream=7)
    rec = s.record(7)
    s.wait(20, 7, rec)
    s.launch("consumer", 10.0, stream=20)
    # consumer waits for producer (1003..1053): starts 1054, ends 1064 -> span 61
    assert s.kernels[1]["ts"] == pytest.approx(1053.0 + GAP)
    out = _replay(_write(tmp_path, s))
    assert out["baseline_us"] == pytest.approx(61.0)
    assert out["measured_us"] == pytest.approx(61.0)


@pytest.mark.parametrize("event_id", [None, 5])
def test_kernel_late_for_its_dependency_does_not_delay_the_host(tmp_path: Path, event_id: int | None) -> None:
    """The consumer starts late because of the producer on the other stream, not because the host was slow:
    the host must go on launching. Also when the cuda_sync record names only the CUDA event (``event_id``):
    the wait is paired with the latest record call, recorded on the stream of the launch before it."""
    s = Synth()
    s.launch("producer", 50.0, stream=7)  # call 1000..1005, runs 1003..1053
    rec = s.record(7)  # call 1005..1007
    s.wait(20, 7, rec, event_id=event_id)  # call 1007..1009
    s.launch("consumer", 10.0, stream=20)  # call 1009..1014, runs 1054..1064 (after the producer)
    s.launch("other", 100.0, stream=21)  # call 1014..1019, idle stream: runs 1017..1117
    assert [k["ts"] for k in s.kernels] == pytest.approx([1003.0, 1054.0, 1017.0])
    out = _replay(_write(tmp_path, s))
    assert out["measured_us"] == pytest.approx(114.0)
    assert out["baseline_us"] == pytest.approx(114.0)


def test_kernel_blocked_by_another_stream_keeps_its_wait_and_the_host_goes_on(tmp_path: Path) -> None:
    """B found its stream idle but started 130 µs after its launch call returned (the device was busy with A
    on another stream): its submission stays inside its call, so the host is not held back (C, launched next
    on a third stream, starts 3 µs after its call as traced), and as B overlapped A its wait is replayed as part
    of it. By hand (calls 5 µs, kernels 3 µs after an idle-stream call, 1 µs after a busy stream's last end):
    w0 1003-1005, w1 1018-1020, g0 1033-1053, g1 1054-1074, g2 1075-1095, A 1096-1196, B (traced) 1186-1206,
    C 1058-1258: span 1003..1258 = 255."""
    s = Synth()
    s.launch("w0", 2.0)
    s.idle(10.0)
    s.launch("w1", 2.0)
    s.idle(10.0)
    for i in range(3):
        s.launch(f"g{i}", 20.0)
    s.launch("A", 100.0)  # call 1045..1050
    b = s.launch("B", 20.0, stream=20)  # call 1050..1055, would start at 1053 on an idle device
    b["ts"] = 1186.0  # held back until A's last blocks (10 µs of overlap)
    s.launch("C", 200.0, stream=21)  # call 1055..1060
    assert [k["ts"] for k in s.kernels] == pytest.approx([1003, 1018, 1033, 1054, 1075, 1096, 1186, 1058])
    out = _replay(_write(tmp_path, s))
    assert out["measured_us"] == pytest.approx(255.0)
    assert out["baseline_us"] == pytest.approx(255.0)


def test_clock_offset_is_detected_and_span_kept(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    for ev in s.events:
        if ev.get("cat") == "kernel":
            ev["ts"] -= 500.0
    out = _replay(_write(tmp_path, s))
    assert out["baseline_us"] == pytest.approx(160.0)
    assert any("clock" in w for w in out["warnings"])


def test_unknown_categories_and_missing_fields_are_tolerated(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    s.events += [
        {"ph": "X", "cat": "some_new_category", "name": "x", "ts": 1, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "no_ts"},
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "ts": 5},
        {"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": "2"},
        "not an event",
    ]
    trace = read_trace(_write(tmp_path, s), progress=False)
    assert len(trace.gpu_ops) == 6
    assert trace.skipped["some_new_category"] == 1
    assert _replay(_write(tmp_path, s))["baseline_us"] == pytest.approx(160.0)


def test_correlation_from_flows_when_args_lack_it(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    for ev in s.events:
        if ev.get("cat") == "kernel":
            del ev["args"]["correlation"]
    assert _replay(_write(tmp_path, s))["baseline_us"] == pytest.approx(160.0)


def test_device_and_thread_selection(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    other = {"ph": "X", "cat": "kernel", "name": "elsewhere", "pid": 1, "tid": 7, "ts": 0.0, "dur": 1000.0,
             "args": {"device": 1, "stream": 7, "correlation": 999}}
    s.events.append(other)
    path = _write(tmp_path, s)
    out = _replay(path)
    assert out["device"] == 0 and out["baseline_us"] == pytest.approx(160.0)
    assert any("devices [0, 1]" in w for w in out["warnings"])
    assert _replay(path, device=1)["measured_us"] == pytest.approx(1000.0)
    with pytest.raises(InputError, match="device 5"):
        _replay(path, device=5)
    with pytest.raises(InputError, match="thread 4242"):
        _replay(path, thread=4242)


@pytest.mark.parametrize("text", ['{"traceEvents": [{"ph": "X", "cat": "kernel"', "{not json", ""])
def test_malformed_file_is_one_input_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=r"bad\.json"):
        read_trace(path, progress=False)


def test_not_a_trace_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"hello": [1, 2]}))
    with pytest.raises(InputError, match="traceEvents"):
        read_trace(path, progress=False)
    with pytest.raises(InputError, match="no such file"):
        read_trace(tmp_path / "missing.json", progress=False)


def test_bare_event_list_is_accepted(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    path = tmp_path / "list.json"
    path.write_text(json.dumps(s.events))
    assert len(read_trace(path, progress=False).gpu_ops) == 6


def test_sm_fraction_follows_occupancy_rules() -> None:
    dev = DeviceProps(0, "H200", 132, 2048, 65536, 233472, 32)
    op = GpuOp("kernel", "k", 0, 7, 0.0, 1.0, 1, grid=(264, 1, 1), block=(256, 1, 1), regs=128, smem=0)
    # 256 threads × 128 regs = 32768 regs per block -> 2 blocks per SM by registers; 264 / (2 × 132) = 1
    assert resident_blocks(op, dev) == 2
    assert sm_fraction(op, dev, 132) == pytest.approx(1.0)
    small = op._replace(grid=(33, 1, 1), regs=32, smem=100_000)
    # shared memory: 233472 // (100000 + 1024) = 2 blocks per SM; 33 / 264 = 0.125
    assert resident_blocks(small, dev) == 2
    assert sm_fraction(small, dev, 132) == pytest.approx(0.125)
    threads = op._replace(grid=(66, 1, 1), block=(1024, 1, 1), regs=16)
    assert sm_fraction(threads, dev, 132) == pytest.approx(66 / (2 * 132))


def test_block_warps_round_a_block_up_to_whole_warps() -> None:
    dev = DeviceProps(0, "H200", 132, 2048, 65536, 233472, 32)
    op = GpuOp("kernel", "k", 0, 7, 0.0, 1.0, 1, grid=(112, 1, 1), block=(128, 1, 1))
    assert block_warps(op, dev) == 4
    assert block_warps(op._replace(block=(32, 16, 1)), dev) == 16
    assert block_warps(op._replace(block=(48, 1, 1)), None) == 2  # 48 threads: two warps (a 32-thread default)
    assert block_warps(op._replace(block=None), dev) is None


def test_serving_engines_moe_gemm_kernels_are_grouped_gemms() -> None:
    """Launched outside aten (no operator says what they are), by their names: vLLM / SGLang's Triton grouped GEMM
    is a GEMM, so block placement tracks its geometry; their routing kernels stay latency-bound elementwise."""
    op = GpuOp("kernel", "fused_moe_kernel", 0, 7, 0.0, 1.0, 1, grid=(264, 1, 1), block=(128, 1, 1))
    assert op_family(op, None) == "grouped_gemm"
    for name in ("moe_align_block_size_kernel", "topkGatingSoftmax"):
        assert op_family(op._replace(name=name), None) in ("elementwise", "topk")


def test_latency_constants_are_what_the_fit_recovers(tmp_path: Path) -> None:
    s = Synth()
    s.launch("lonely", 1.0)
    s.idle(20.0)
    s.launch("again", 1.0)
    s.launch("busy", 30.0)
    s.launch("tail", 1.0)
    out = _replay(_write(tmp_path, s))
    assert out["kernel_gap_us"] == pytest.approx(GAP)
    assert out["baseline_us"] == pytest.approx(s.span())
    assert s.kernels[0]["ts"] == pytest.approx(1000.0 + LATENCY)


def test_ops_that_overlapped_another_stream_are_marked_contended():
    """a (stream 1, 0..10) overlaps b (stream 2, 5..8); c (stream 1, 10..12) only touches a's end; d on
    stream 2 after b overlaps nothing."""
    from simulator.kineto.events import GpuOp
    from simulator.kineto.program import overlapped_ops

    a = GpuOp("kernel", "a", 0, 1, 0.0, 10.0, 1)
    b = GpuOp("kernel", "b", 0, 2, 5.0, 3.0, 2)
    c = GpuOp("kernel", "c", 0, 1, 10.0, 2.0, 3)
    d = GpuOp("kernel", "d", 0, 2, 13.0, 1.0, 4)
    assert overlapped_ops([c, a, d, b]) == {id(a), id(b)}
