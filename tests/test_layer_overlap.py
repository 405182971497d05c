"""``benchmarks/layer_overlap.py`` on a hand-made bench run: two traces of 2 replays × 1 layer each (the first
replay dropped), a shared GEMM on the aux stream beside a router kernel that runs 3× longer than alone."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark


def _script():
    return load_benchmark("layer_overlap")


def _kernel(name: str, start: float, dur: float, stream: int, grid: int) -> dict:
    return {"name": name, "start_us": start, "dur_us": dur, "stream": stream, "grid": [grid, 1, 1],
            "block": [128, 1, 1], "registers per thread": 80}


def _run(tmp_path: Path) -> Path:
    # sequential: gemm 10 µs, router 4 µs, grouped 20 µs on one stream, layer span 34 µs
    seq_layer = [_kernel("gemm", 0, 10, 7, 96), _kernel("router", 10, 4, 7, 112), _kernel("grouped", 14, 20, 7, 132)]
    # multi_stream: gemm on aux (stream 9) from 0 to 10 beside the router (main), which takes 12 µs; span 32 µs
    ms_layer = [_kernel("gemm", 0, 10, 9, 96), _kernel("router", 0, 12, 7, 112), _kernel("grouped", 12, 20, 7, 132)]
    slow_first = [dict(k, dur_us=k["dur_us"] * 5) for k in ms_layer]  # the profiled graph's first replay
    records = []
    for strategy, layers in (("sequential", [seq_layer, seq_layer]), ("multi_stream", [slow_first, ms_layer])):
        trace = f"traces/p_t2_{strategy}_graph.json.gz"
        (tmp_path / "traces").mkdir(exist_ok=True)
        (tmp_path / trace).write_bytes(gzip.compress(json.dumps({"moesim_graph_replays_per_trace": 2}).encode()))
        records.append({"preset": "p", "tokens": 2, "strategy": strategy, "mode": "graph", "trace": trace,
                        "layers": 2, "kernels": [k for layer in layers for k in layer]})
    (tmp_path / "kernels.json").write_text(json.dumps(records))
    (tmp_path / "cases.json").write_text(json.dumps([
        {"preset": "p", "tokens": 2, "strategy": "sequential", "mode": "graph", "median_us": 40.0},
        {"preset": "p", "tokens": 2, "strategy": "multi_stream", "mode": "graph", "median_us": 38.0}]))
    return tmp_path


def test_the_kernel_that_lost_most_comes_first(tmp_path: Path) -> None:
    [point] = _script().overlaps(_run(tmp_path), top=1)
    assert (point.preset, point.tokens) == ("p", 2)
    assert point.measured_gain == pytest.approx(0.05)
    assert point.sequential_span_us == 34 and point.multi_stream_span_us == 32
    assert point.aux_work_us == 10 and point.aux_blocks == [96]  # the gemm: the only aux kernel
    [router] = point.slowed
    assert (router.name, router.stream, router.ctas, router.threads) == ("router", "main", 112, 128)
    assert (router.sequential_us, router.multi_stream_us) == (4, 12)


def test_a_run_without_traces_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
