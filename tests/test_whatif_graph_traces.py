"""``benchmarks/whatif_graph_traces.py``: which sequential positions go to aux, their ``--aux-kernels`` ranges,
and a run over the committed layer traces (each point's measured gain from its cases, the what-if's from the
simulator: checked for being finite and the measured side for agreeing with ``cases.json``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def _script():
    return load_benchmark("whatif_graph_traces")


def test_ranges() -> None:
    script = _script()
    assert script.ranges([0, 1, 2, 5, 6, 9]) == "0-2,5-6,9-9"
    assert script.ranges([3]) == "3-3"


def test_aux_positions_follow_the_multi_stream_layer() -> None:
    script = _script()
    seq = [{"name": n, "stream": 7} for n in ("gemm", "act", "gemm", "router", "topk", "combine", "add")]
    ms = [{"name": "router", "stream": 7}, {"name": "gemm", "stream": 9}, {"name": "act", "stream": 9},
          {"name": "gemm", "stream": 9}, {"name": "topk", "stream": 7}, {"name": "combine", "stream": 7},
          {"name": "add", "stream": 7}]
    assert script.aux_positions(seq, ms) == [0, 1, 2]  # the aux stream is the one with fewer ops


def test_over_the_layer_traces() -> None:
    script = _script()
    run = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "layer_traces"
    cases = {(c["preset"], c["tokens"], c["strategy"]): c["median_us"]
             for c in json.loads((run / "cases.json").read_text())}
    found = script.points(run)
    assert len(found) == len(cases) // 2
    for p in found:
        assert p.measured_gain == 1 - cases[(p.preset, p.tokens, "multi_stream")] / cases[(p.preset, p.tokens,
                                                                                            "sequential")]
        assert math.isfinite(p.predicted_gain) and p.aux_kernels.startswith("0-")


LAYER_TRACES = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "layer_traces" / "traces"


def _whatif(capsys, *extra: str) -> tuple[int, str, str]:
    from tests.test_cli_hardening import moesim

    trace = LAYER_TRACES / "deepseek_v3_t2_sequential_graph.json.gz"
    return moesim(["whatif", "trace", str(trace), "--launch", "graph", "--aux-kernels", "0-4", "--json", *extra],
                  capsys)


def test_sharing_placement_packs_the_fp32_router_beside_the_shared_experts(capsys) -> None:
    """DeepSeek-V3 at 2 tokens: the fp32 router GEMM's 112 light blocks land on the SMs the shared experts' 96
    full-SM blocks leave and stay packed there, so block placement (the default) predicts less gain than the
    profile's residency form; the JSON says which sharing ran."""
    code, out, _ = _whatif(capsys, "--sharing", "profile")
    assert code == 0
    residency = json.loads(out)
    code, out, _ = _whatif(capsys)
    assert code == 0
    placed = json.loads(out)
    assert (residency["sharing_form"], placed["sharing_form"]) == ("profile", "placement")
    assert "block placement" in placed["sources"]["sharing"] and "memory_latency" in placed["sources"]["sharing"]
    assert placed["baseline_per_layer_us"] == pytest.approx(residency["baseline_per_layer_us"], rel=0.05)
    assert placed["gain"] < residency["gain"]


def test_an_unknown_sharing_is_a_usage_error(capsys) -> None:
    code, out, err = _whatif(capsys, "--sharing", "fluid")
    assert code == 2 and out == "" and "--sharing" in err and "Traceback" not in err


def test_a_reference_run_gives_the_measured_side(tmp_path: Path) -> None:
    """``--reference``: each point's measured gain is the reference's mean over its records (here two layouts of
    one point, 10 % and 30 % gain in time: mean times 100 / 80 → 20 %), and only the points it holds are kept."""
    run = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "layer_traces"
    records = [{"preset": "deepseek_v3", "tokens": 2, "strategy": s, "mode": "graph", "median_us": us}
               for s, times in (("sequential", (100.0, 100.0)), ("multi_stream", (90.0, 70.0))) for us in times]
    (tmp_path / "cases.json").write_text(json.dumps(records))
    found = _script().points(run, reference=tmp_path)
    assert [(p.preset, p.tokens) for p in found] == [("deepseek_v3", 2)]
    assert found[0].measured_gain == pytest.approx(0.20)
    assert "| measured gain (reference run) |" in _script().markdown(found, "measured gain (reference run)")


def test_decisions_score_the_what_if_as_a_policy() -> None:
    """Three hand-made points, margin 0.5 %: the what-if keeps sequential where it predicts −1 % (measured −2 %:
    regret 0) and picks multi_stream where it predicts +3 % (measured −1 %: regret 1 point); "always" pays 2 and
    1 points there. Mean regret what-if 1/3, always 1 point; worst 1 point for both."""
    script = _script()
    found = [script.Point("a", 1, "0-4", 0.05, 0.04, "p"), script.Point("a", 2, "0-4", -0.02, -0.01, "p"),
             script.Point("a", 4, "0-4", -0.01, 0.03, "p")]
    text = script.decisions_markdown(found, 0.005)
    assert "| what-if | 0.33 | 1.00 | a t4 | 2/3 |" in text
    assert "| always | 1.00 | 2.00 | a t2 | 3/3 |" in text
    assert "the what-if beats always: mean regret 0.33 vs 1.00 points, worst 1.00 vs 2.00" in text


def test_a_graph_trace_alone_says_its_gemms_carry_no_shapes(capsys) -> None:
    """A graph replay records no operator shapes: the what-if says so and names the remedy; the eager trace of the
    same point (shapes recorded) with --durations-from the graph trace does not need the note."""
    code, out, _ = _whatif(capsys)
    assert code == 0 and any("carries its operator's shapes" in n for n in json.loads(out)["notes"])
    eager = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "eager_traces" / "traces"
    from tests.test_cli_hardening import moesim

    code, out, _ = moesim(["whatif", "trace", str(eager / "deepseek_v3_t2_sequential_eager.json.gz"), "--launch",
                           "graph", "--aux-kernels", "0-4", "--durations-from",
                           str(LAYER_TRACES / "deepseek_v3_t2_sequential_graph.json.gz"), "--json"], capsys)
    assert code == 0 and not any("carries its operator's shapes" in n for n in json.loads(out)["notes"])


def test_eager_traces_ask_the_what_if_with_the_graph_durations() -> None:
    """``--eager``: the points whose eager trace the folder holds, their layout of aux ops unchanged; a point the
    folder lacks is left out, and a folder that holds none of them is a one-line error."""
    run = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "layer_traces"
    eager = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "eager_traces"
    graph_only = {(p.preset, p.tokens): p for p in _script().points(run)}
    with_shapes = _script().points(run, eager=eager)
    assert with_shapes and {(p.preset, p.tokens) for p in with_shapes} <= set(graph_only)
    for p in with_shapes:
        assert p.aux_kernels == graph_only[(p.preset, p.tokens)].aux_kernels
        assert p.measured_gain == graph_only[(p.preset, p.tokens)].measured_gain and math.isfinite(p.predicted_gain)
    from simulator.errors import InputError

    with pytest.raises(InputError, match="and an eager trace in"):
        _script().points(run, eager=ROOT / "tests")
