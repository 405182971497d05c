"""kernels_real.grouped_context_probe: the layer's grouped GEMM timed after each of several kernels."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernels_real import grouped_context_probe as probe  # noqa: E402


def test_grouped_durations_keep_grouped_kernels_in_time_order() -> None:
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "_ZN7cutlass...GroupProblemShape...", "ts": 30.0, "dur": 64.5},
        {"cat": "kernel", "name": "nvjet_sm90_tst_128x8", "ts": 10.0, "dur": 40.0},
        {"cat": "cpu_op", "name": "GroupProblemShape", "ts": 5.0, "dur": 1.0},
        {"cat": "kernel", "name": "x GroupProblemShape y", "ts": 20.0, "dur": 80.0},
    ]}
    assert probe.grouped_durations(trace) == [80.0, 64.5]
    assert probe.grouped_durations({}) == []


def test_timed_durations_pick_the_layer_calls() -> None:
    durs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert probe.timed_durations("chain", durs, steps=3) == [2.0, 3.0, 5.0, 6.0]
    assert probe.timed_durations("other_expert", durs, steps=3) == [2.0, 4.0, 6.0]
    assert probe.timed_durations("dense", durs, steps=3) == durs


def test_bad_input_is_one_line(capsys) -> None:
    assert probe.main(["--out", "/tmp/x", "--presets", "nope"]) == 2
    assert "unknown MoE preset" in capsys.readouterr().err
    assert probe.main(["--out", "/tmp/x", "--steps", "1"]) == 2
    assert "--steps must be >= 2" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_times_every_context_on_gpu() -> None:
    record = probe.time_point("deepseek_v2_lite", 1, steps=2, replays=1, device=torch.device("cuda"))
    assert record["experts_hit"] == 6
    assert set(record["median_us"]) == set(probe.CONTEXTS) and min(record["median_us"].values()) > 0
