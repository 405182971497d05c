"""The bench harness in its CPU mode writes well-formed records, traces and tables; bad input exits 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kernels_real import bench

REQUIRED = {"preset", "tokens", "strategy", "mode", "median_us", "min_us", "p90_us", "replays", "weight_sets",
            "backend"}


def test_cpu_quick_run_writes_well_formed_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    rc = bench.main(["--out", str(out), "--device", "cpu", "--quick", "--presets", "deepseek_v2_lite",
                     "qwen3_30b_a3b", "--tokens", "1", "8", "--trace-tokens", "8"])
    assert rc == 0
    cases = json.loads((out / "cases.json").read_text())
    # deepseek_v2_lite: 3 strategies, qwen3: sequential only; × 2 token counts; eager only on CPU
    assert len(cases) == (3 + 1) * 2
    for c in cases:
        assert set(c) >= REQUIRED
        assert c["mode"] == "eager" and c["backend"] == "loop"
        assert 0 < c["min_us"] <= c["median_us"] <= c["p90_us"]
        assert c["replays"] >= 5 and c["weight_sets"] == 2
    assert {(c["preset"], c["strategy"]) for c in cases if c["tokens"] == 8} == {
        ("deepseek_v2_lite-tiny", s) for s in ("sequential", "multi_stream", "fused_shared")
    } | {("qwen3_30b_a3b-tiny", "sequential")}
    traced = [c for c in cases if c["trace"]]
    assert {c["strategy"] for c in traced} == {"sequential", "multi_stream", "fused_shared"}
    for c in traced:
        trace = json.loads(gzip.decompress((out / c["trace"]).read_bytes()))
        names = {e.get("name") for e in trace["traceEvents"]}
        assert "moe.routed_experts" in names and "moe.gate" in names
        assert any("Input Dims" in e.get("args", {}) for e in trace["traceEvents"])  # record_shapes
        assert trace["moesim_strategy"] == c["strategy"]
    env = json.loads((out / "env.json").read_text())
    assert env["backend"] == "cpu" and env["rocm_tested"] is False and env["skipped"] == []
    assert len(json.loads((out / "kernels.json").read_text())) == 3
    gains = (out / "gains.md").read_text()
    assert "| deepseek_v2_lite-tiny | eager | 8 |" in gains
    assert "| qwen3_30b_a3b-tiny | eager | 8 |" in gains and "n/a" in gains
    assert "gain %" in capsys.readouterr().out


def test_gain_table_by_hand() -> None:
    cases = [{"preset": "p", "tokens": 4, "strategy": s, "mode": "graph", "median_us": v}
             for s, v in (("sequential", 200.0), ("multi_stream", 150.0), ("fused_shared", 250.0))]
    table = bench.gains_markdown(cases, {"date": "d"})
    assert "| p | graph | 4 | 200.0 | 150.0 | +25.0 | 250.0 | -25.0 |" in table


def test_budget_guard_skips_and_still_writes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rc = bench.main(["--out", str(out), "--device", "cpu", "--quick", "--presets", "llama4_scout",
                     "--budget-s", "0", "--trace-presets"])
    assert rc == 0
    assert json.loads((out / "cases.json").read_text()) == []
    skipped = json.loads((out / "env.json").read_text())["skipped"]
    assert len(skipped) == 2 * 3 and all("--budget-s" in s for s in skipped)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--presets", "nope"], "unknown MoE preset"),
        (["--tokens", "0"], "token counts must be >= 1"),
        (["--strategies", "parallel"], "unknown strategy"),
        (["--modes", "lazy"], "unknown mode"),
        (["--eager-trace-calls", "0"], "--eager-trace-calls must be >= 1"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    out = tmp_path / "run"
    assert bench.main(["--out", str(out), "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_interleaved_eager_and_trace_only_with_back_to_back_calls(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert bench.main(["--out", str(out), "--device", "cpu", "--quick", "--presets", "deepseek_v2_lite",
                       "--tokens", "1", "4", "--modes", "eager", "--interleave-eager", "--trace-presets"]) == 0
    cases = json.loads((out / "cases.json").read_text())
    assert len(cases) == 2 * 3  # 2 token counts × 3 strategies, all interleaved in one pass
    for c in cases:
        assert c["order"].startswith(f"interleaved across all tokens × strategies of the preset, "
                                     f"{bench.QUICK_EAGER_ROUNDS} rounds")
        assert c["replays"] >= bench.QUICK_EAGER_ROUNDS * bench.MIN_BURST
        assert c["replays"] == bench.QUICK_EAGER_ROUNDS * c["burst_calls"]
        assert c["min_us"] <= c["steady_median_us"] and c["min_us"] <= c["first_median_us"]
        assert c["burst_calls"] >= c["weight_sets"] + 1  # every weight set has steady calls
        assert len(c["bursts_us"]) == bench.QUICK_EAGER_ROUNDS and len(c["steady_set_medians_us"]) == c["weight_sets"]
    for tokens in (1, 4):  # every strategy of a token count runs bursts of one length
        assert len({c["burst_calls"] for c in cases if c["tokens"] == tokens}) == 1
    traced = tmp_path / "traced"
    assert bench.main(["--out", str(traced), "--device", "cpu", "--quick", "--presets", "deepseek_v2_lite",
                       "--tokens", "4", "--strategies", "sequential", "--trace-only",
                       "--eager-trace-calls", "2"]) == 0
    assert json.loads((traced / "cases.json").read_text()) == []
    [entry] = json.loads((traced / "kernels.json").read_text())
    assert entry["layers"] == 2 and entry["mode"] == "eager"
    trace = json.loads(gzip.decompress((traced / entry["trace"]).read_bytes()))
    assert trace["moesim_layers_per_trace"] == 2 and "moesim_median_us" not in trace
    assert "--trace-only" in trace["moesim_note"]
    gates = [e for e in trace["traceEvents"] if e.get("name") == "moe.gate" and e.get("cat") == "user_annotation"]
    assert len(gates) == 2  # two layer calls in one trace


def test_interleaved_bursts_share_a_length_per_group() -> None:
    """Steps of ~1 ms and ~5 ms per call: alone the fast one gets longer bursts (about 15 vs 3 calls for
    0.06 s over 4 rounds); grouped, both run bursts of one length, four bursts each."""
    import time

    timer = bench.Timer(gpu=False, target_s=0.06, min_n=1, max_n=10)
    steps = {("a", 1): lambda i: time.sleep(0.001), ("a", 2): lambda i: time.sleep(0.005)}
    alone = timer.measure_interleaved(steps, rounds=4)
    assert len(alone[("a", 1)][0]) > len(alone[("a", 2)][0]) >= bench.MIN_BURST
    grouped = timer.measure_interleaved(steps, rounds=4, group=lambda key: key[0])
    lengths = {len(b) for bursts in grouped.values() for b in bursts}
    assert len(lengths) == 1 and lengths.pop() > bench.MIN_BURST
    assert all(len(bursts) == 4 for bursts in grouped.values())


def test_eager_record_keeps_bursts_and_steady_medians_per_weight_set(tmp_path: Path) -> None:
    """Call i of a burst runs weight set i mod 2: steady calls (i >= 1) of set 0 are 5, 7; of set 1: 1, 3, 3, 1."""
    options = bench.BenchOptions.from_args(bench._parse(["--out", str(tmp_path), "--device", "cpu"]))
    sweep = bench.Sweep(options)
    cfg = bench.get_preset("deepseek_v2_lite").scaled_down()
    bursts = [[10.0, 1.0, 5.0, 3.0], [20.0, 3.0, 7.0, 1.0]]
    layer = bench.MoELayer(cfg, sweep.device)
    sweep._record_case(cfg, layer, 1, "sequential", "eager", [x for b in bursts for x in b], 1, 2, "o", bursts)
    [record] = sweep.cases
    assert record["burst_calls"] == 4 and record["bursts_us"] == bursts
    assert record["first_median_us"] == 15.0 and record["steady_median_us"] == 3.0
    assert record["steady_set_medians_us"] == [6.0, 2.0] and record["steady_sets_mean_us"] == 4.0


def test_options_fill_the_defaults_and_stay_fixed(tmp_path: Path) -> None:
    """--quick: tokens 1 and 16, the first trace preset among those given, the largest token count traced; on CPU
    the presets' shapes are scaled down; the options cannot be changed afterwards."""
    import dataclasses

    options = bench.BenchOptions.from_args(bench._parse(
        ["--out", str(tmp_path), "--device", "cpu", "--quick", "--presets", "qwen3_30b_a3b", "deepseek_v2_lite",
         "deepseek_v3"]))
    assert options.tokens == (1, 16) and options.trace_tokens == (16,)
    assert options.trace_presets == ("deepseek_v2_lite",)
    assert [c.name for c in options.configs] == ["qwen3_30b_a3b-tiny", "deepseek_v2_lite-tiny", "deepseek_v3-tiny"]
    full = bench.BenchOptions.from_args(bench._parse(["--out", str(tmp_path), "--device", "cpu",
                                                      "--presets", "deepseek_v2_lite", "deepseek_v3"]))
    assert full.tokens == bench.DEFAULT_TOKENS and full.trace_tokens == bench.TRACE_TOKENS
    assert full.trace_presets == ("deepseek_v2_lite", "deepseek_v3")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.quick = False  # type: ignore[misc]


def test_the_trace_pass_holds_the_weight_sets_that_were_timed(tmp_path, monkeypatch):
    """The set count is chosen once per preset: a trace pass that would find less memory free (here: a count
    function that returns fewer sets on its second call) still runs on the timed sets."""
    import kernels_real.bench as bench

    counts = iter([3, 1])
    monkeypatch.setattr(bench, "_weight_sets", lambda cfg, gpu, override: next(counts))
    seen = []
    sweep = bench.Sweep(bench.BenchOptions.from_args(bench._parse(
        ["--out", str(tmp_path), "--device", "cpu", "--quick", "--presets", "deepseek_v2_lite"])))
    tiny = bench.get_preset("deepseek_v2_lite").scaled_down()
    for _ in range(2):
        sweep._with_weights(tiny, lambda cfg, layer, w: seen.append(len(w)))
    assert seen == [3, 3]


def test_kernel_records_carry_start_times_and_occupancy() -> None:
    """A hand-made Kineto trace: kernels come back in start order, starts relative to the first kernel, the
    occupancy args kept where Kineto gave them and absent where it did not; CPU ops are not kernels."""
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "b", "ts": 110.5, "dur": 3.0, "args": {"stream": 9, "grid": [1, 1, 1],
                                                                          "block": [32, 1, 1]}},
        {"cat": "cpu_op", "name": "aten::mm", "ts": 90.0, "dur": 5.0, "args": {}},
        {"cat": "kernel", "name": "a", "ts": 100.0, "dur": 7.0, "args": {
            "stream": 7, "grid": [132, 1, 1], "block": [384, 1, 1], "registers per thread": 168,
            "shared memory": 200704, "blocks per SM": 1.0, "est. achieved occupancy %": 19}}]}
    first, second = bench._kernels_from_trace(trace)
    assert (first["name"], first["start_us"], first["stream"]) == ("a", 0.0, 7)
    assert first["registers per thread"] == 168 and first["shared memory"] == 200704
    assert (second["name"], second["start_us"], second["dur_us"]) == ("b", 10.5, 3.0)
    assert "registers per thread" not in second
