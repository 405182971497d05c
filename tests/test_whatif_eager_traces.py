"""``benchmarks/whatif_eager_traces.py``, ``latency_classes.py`` and ``graph_node_gaps.py``: the trace what-if
asked as a user asks it (``moesim whatif trace EAGER_TRACE --aux-region moe.shared_experts --launch graph``) over
the committed eager traces of call 29, the per-class slowdown table read from the layer traces, and the gaps
around a graph's memset nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03"


def test_trace_names_give_preset_and_tokens() -> None:
    from calibration.fit_whatif import eager_traces

    found = eager_traces(MEASURED / "eager_traces")
    assert len(found) == 72
    assert found[("deepseek_v2_lite@tp2", 16)].name == "deepseek_v2_lite@tp2_t16_sequential_eager.json.gz"


def test_a_point_is_what_the_cli_predicts_and_its_measured_gain_the_layout_mean(capsys) -> None:
    """Llama-4-Scout TP8 at 1 token: the script's predicted gain is the CLI's ``gain`` for the same trace and
    command line; the measured gain is the mean over the layout-means records of (1 - multi_stream / sequential)
    medians taken per strategy."""
    from tests.test_cli_hardening import moesim

    script = load_benchmark("whatif_eager_traces")
    point = next(p for p in script.points(MEASURED / "eager_traces", MEASURED / "layout_means", [])
                 if (p.preset, p.tokens) == ("llama4_scout@tp8", 1))
    trace = MEASURED / "eager_traces" / "traces" / "llama4_scout@tp8_t1_sequential_eager.json.gz"
    code, out, _ = moesim(["whatif", "trace", str(trace), "--aux-region", "moe.shared_experts", "--launch",
                           "graph", "--json"], capsys)
    assert code == 0
    assert point.predicted_gain == pytest.approx(json.loads(out)["gain"], abs=1e-5)  # the JSON rounds to 5 places
    records = [c for c in json.loads((MEASURED / "layout_means" / "cases.json").read_text())
               if (c["preset"], c["tokens"], c["mode"]) == ("llama4_scout@tp8", 1, "graph")]
    mean = {s: sum(c["median_us"] for c in records if c["strategy"] == s) for s in ("sequential", "multi_stream")}
    assert point.measured_gain == pytest.approx(1 - mean["multi_stream"] / mean["sequential"])


def test_a_folder_without_eager_traces_is_a_one_line_error(tmp_path, capsys) -> None:
    script = load_benchmark("whatif_eager_traces")
    (tmp_path / "traces").mkdir()
    assert script.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no *_sequential_eager.json.gz trace" in err and "Traceback" not in err


def test_latency_class_bands() -> None:
    script = load_benchmark("latency_classes")
    assert [script.band(x) for x in (0.0, 0.099, 0.1, 0.5, 0.89, 0.9, 1.0)] == [0, 0, 1, 3, 4, 5, 5]
    assert script.band_label(0) == "0.0–0.1" and script.band_label(5) == "≥ 0.9"


def test_latency_classes_over_the_layer_traces() -> None:
    """Every routing-chain kernel of the call-19 traces at 1/2/4 tokens is classed and slowed by a finite factor;
    with nothing beside it (HBM share below 0.1) the memory-access kernels run at their own speed (median within
    5 %), and the ones beside more than 0.7 of the ceiling at least 1.5× slower: the regime the classes model."""
    script = load_benchmark("latency_classes")
    rows = script.slowdowns(MEASURED / "layer_traces", MEASURED / "eager_traces")
    assert {cls for cls, _, _ in rows} <= {"gather", "sort", "topk", "softmax", script.GEMV}
    quiet = sorted(s for cls, share, s in rows if cls == "gather" and share < 0.1)
    loud = sorted(s for cls, share, s in rows if cls == "gather" and share >= 0.7)
    assert abs(quiet[len(quiet) // 2] - 1.0) < 0.05 and loud[len(loud) // 2] > 1.5


def test_graph_node_gaps_on_a_hand_made_trace(tmp_path) -> None:
    """One stream: kernel a (0–2 µs), memset (2.5–3), GEMM nvjet (8–10), kernel b (10.4–11): the gaps are kernel →
    memset 0.5, memset → GEMM 5, GEMM → kernel 0.4 (a kernel → kernel gap); a second stream is read apart."""
    import gzip

    script = load_benchmark("graph_node_gaps")

    def op(cat: str, name: str, ts: float, dur: float, stream: int = 7) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}

    events = [op("kernel", "a", 0, 2), op("gpu_memset", "Memset (Device)", 2.5, 0.5), op("kernel", "nvjet_tst", 8, 2),
              op("kernel", "b", 10.4, 0.6), op("kernel", "other_stream", 3, 1, stream=9)]
    (tmp_path / "traces").mkdir()
    trace = tmp_path / "traces" / "x_t1_sequential_graph.json.gz"
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    got = script.gaps(trace)
    assert got["kernel → memset"] == [0.5] and got["memset → GEMM"] == [5.0]
    assert got["kernel → kernel"] == [pytest.approx(0.4)] and "memset → other kernel" not in got
    assert "| 1 | 5.00 |" in script.markdown([tmp_path])
