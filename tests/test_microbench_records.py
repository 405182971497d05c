"""Record builders, atomic writing, trace attribution and the summary table (pure)."""

from __future__ import annotations

import json

import pytest

from calibration.microbench import corun, records, shapes, table, traces
from calibration.microbench.__main__ import main, parse_args


def test_solo_record_carries_family_shape_bytes_flops_and_stats():
    spec = shapes.gemm_spec(4, 8, 16, "t")
    rec = records.solo_record(spec, {"median_us": 2.0, "p10_us": 1.5, "p90_us": 3.0, "n": 5}, {"graph_n": 8})
    assert rec["family"] == "gemm"
    assert rec["shape"] == {"op": "mm", "M": 4, "K": 8, "N": 16, "tag": "t"}
    assert rec["bytes"] == 2 * (32 + 128 + 64)
    assert rec["flops"] == 2 * 4 * 8 * 16
    assert rec["grid"] is None and rec["block"] is None
    assert rec["graph_n"] == 8


def _corun(a_us=10.0, b_us=5.0, seq=15.0, a_in=12.0, b_in=6.0):
    a, b = shapes.copy_spec(100), shapes.chain_spec([shapes.copy_spec(10), shapes.copy_spec(20)], "c")
    med = {"a": a_us, "b": b_us, "seq": seq, "a_in": a_in, "b_in": b_in, "together": max(a_in, b_in)}
    return records.corun_record("mem_x_mem", a, b, med, 9, {})


def test_corun_record_slowdowns_and_gain():
    rec = _corun()
    assert rec["together_us"] == 12.0
    assert rec["slowdown_a"] == pytest.approx(1.2)
    assert rec["slowdown_b"] == pytest.approx(1.2)
    assert rec["overlap_gain"] == pytest.approx(1 - 12 / 15)
    assert rec["b"]["bytes"] == 60  # chain of two copies, read + write
    assert rec["b"]["shape"]["ops"][1] == {"family": "copy", "op": "copy", "bytes": 20, "tag": ""}
    assert rec["n"] == 9
    assert rec["first"] is None and rec["offset_us"] == 0.0  # gated: both sides start on one event


def test_corun_record_rejects_an_unknown_first_side():
    with pytest.raises(ValueError, match="first"):
        records.corun_record("k", shapes.copy_spec(1), shapes.copy_spec(1),
                             {"a": 1, "b": 1, "seq": 2, "a_in": 1, "b_in": 1, "together": 1}, 1, {}, first="c")


def test_corun_sample_spans_from_each_sides_own_begin():
    got = corun.corun_sample((0.5, 10.5), (2.5, 40.0))  # a begins first, b 2 µs later
    assert got == {"a_in": 10.0, "b_in": 37.5, "together": 39.5, "offset": 2.0, "a_start": 0.5, "b_start": 2.5}


def test_staggered_records_one_per_start_order():
    a, b = shapes.topk_spec(1, 64, 8), shapes.gemm_spec(1, 8, 16)
    pair = {"kind": "routing_x_shared", "a": a, "b": b, "staggered": True}
    solo = {"a": [9.0, 10.0, 11.0], "b": [20.0, 20.0, 20.0], "seq": [30.0, 31.0, 29.0]}
    orders = {"a": [corun.corun_sample((0.0, 10.0), (2.0, 24.0)) for _ in range(3)],
              "b": [corun.corun_sample((2.0, 32.0), (0.0, 20.0)) for _ in range(3)]}
    recs = corun.staggered_records(pair, solo, orders, 3, 0)
    assert [r["first"] for r in recs] == ["a", "b"]
    a_first, b_first = recs
    assert a_first["a"]["solo_us"] == 10.0 and a_first["b"]["solo_us"] == 20.0 and a_first["sequential_us"] == 30.0
    assert (a_first["a_us_in_corun"], a_first["b_us_in_corun"], a_first["together_us"]) == (10.0, 22.0, 24.0)
    assert (a_first["offset_us"], a_first["a_start_us"], a_first["b_start_us"]) == (2.0, 0.0, 2.0)
    assert b_first["slowdown_a"] == pytest.approx(3.0)  # 30 µs beside the GEMM that took the SMs first
    assert b_first["overlap_gain"] == pytest.approx(1 - 32 / 30)
    assert b_first["samples_us"]["a_in"] == [30.0, 30.0, 30.0]
    json.dumps(recs, allow_nan=False)


def test_write_json_atomic_replaces_and_leaves_no_temp(tmp_path):
    path = tmp_path / "sub" / "x.json"
    records.write_json_atomic(path, {"a": 1})
    records.write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
    with pytest.raises(ValueError):
        records.write_json_atomic(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]


def _rt(cat, ts, corr):
    return {"cat": cat, "name": "launch", "ts": ts, "dur": 3, "tid": 7, "args": {"correlation": corr}}


def _trace():
    ev = [
        {"cat": "user_annotation", "name": "mb_solo:0", "ts": 100.0, "dur": 50.0, "tid": 7},
        {"cat": "user_annotation", "name": "mb_solo:1", "ts": 200.0, "dur": 50.0, "tid": 7},
        {"cat": "user_annotation", "name": "other", "ts": 300.0, "dur": 50.0, "tid": 7},
        _rt("cuda_runtime", 110.0, 1), _rt("cuda_driver", 120.0, 2), _rt("cuda_runtime", 210.0, 3),
        _rt("cuda_runtime", 310.0, 4),
        {"cat": "kernel", "name": "k_b", "ts": 140.0, "dur": 9.0, "args": {"correlation": 2, "grid": [4, 1, 1],
                                                                          "block": [128, 1, 1],
                                                                          "registers per thread": 168,
                                                                          "shared memory": 225636}},
        {"cat": "kernel", "name": "k_a", "ts": 130.0, "dur": 2.0, "args": {"correlation": 1, "grid": [1, 1, 1],
                                                                          "block": [32, 1, 1]}},
        {"cat": "kernel", "name": "k_c", "ts": 215.0, "dur": 1.0, "args": {"correlation": 3}},
        {"cat": "kernel", "name": "k_other", "ts": 315.0, "dur": 1.0, "args": {"correlation": 4}},
        _rt("cuda_runtime", 230.0, 5),
        {"cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 240.0, "dur": 4.0, "args": {"correlation": 5}},
    ]
    return {"traceEvents": ev}


def test_kernels_are_attributed_to_the_label_that_issued_them():
    ks = traces.kernels_by_label(_trace(), "mb_solo:")
    assert set(ks) == {"mb_solo:0", "mb_solo:1"}
    assert [k["name"] for k in ks["mb_solo:0"]] == ["k_a", "k_b"]  # ordered by start
    assert [k["name"] for k in ks["mb_solo:1"]] == ["k_c", "Memcpy DtoD"]
    facts = traces.summarize_kernels(ks["mb_solo:0"])
    assert facts == {"kernels": 2, "kernel_names": ["k_a", "k_b"], "kernel_us": 11.0, "grid": [4, 1, 1],
                     "block": [128, 1, 1], "registers": 168, "shared_memory": 225636}  # the longest kernel's
    assert traces.summarize_kernels(ks["mb_solo:1"])["registers"] is None  # the trace has none for k_c
    assert traces.summarize_kernels([]) == {"kernels": 0}
    long = traces.summarize_kernels([{"name": "x" * 500, "dur": 1.0, "grid": None, "block": None}])
    assert len(long["kernel_names"][0]) == traces.NAME_CHARS


def test_runtime_calls_on_another_thread_id_still_match():
    tr = _trace()
    for e in tr["traceEvents"]:
        if e["cat"] in ("cuda_runtime", "cuda_driver"):
            e["tid"] = 99
    assert [k["name"] for k in traces.kernels_by_label(tr, "mb_solo:")["mb_solo:0"]] == ["k_a", "k_b"]


def test_summary_table_names_its_source_and_pairs():
    doc = records.document(
        {"gpu": "GPU-X", "date": "2026-01-01"}, {"copy_GBps": 4000.0, "bf16_tflops": 700.0},
        [], [_corun()], {"launch_us": 5.0, "queue_depth": 1000}, ["n1"])
    text = table.summary(doc, "out/microbench.json")
    assert "measured here (GPU-X, 2026-01-01; out/microbench.json)" in text
    assert "copy 4000 GB/s" in text and "bf16 matmul 700 TFLOP/s" in text
    assert "launch 5.00" in text and "record n/a" in text
    assert "20.0%" in text  # gain 1 - 12/15
    assert "note: n1" in text


def test_cli_without_gpu_says_so_and_exits_2(tmp_path, capsys):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("no GPU: ") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_cli_rejects_bad_arguments(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for argv in (["--out", str(f)], ["--out", str(tmp_path), "--budget-s", "0"], [],
                 ["--out", str(tmp_path), "--only", "solo"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_only_corun_is_parsed(tmp_path):
    assert parse_args(["--out", str(tmp_path), "--only", "corun"]).only == "corun"
    assert parse_args(["--out", str(tmp_path)]).only is None


def test_exported_trace_of_a_cpu_profile_is_a_chrome_trace():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    from calibration.microbench.traces import exported_trace

    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("mb_solo:probe"):
        torch.ones(4).add_(1.0)
    trace = exported_trace(prof)
    assert any(e.get("name") == "mb_solo:probe" for e in trace["traceEvents"])
