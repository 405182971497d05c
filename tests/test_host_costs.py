"""Profiler-free host timings of the layer's torch ops (kernels_real.host_costs) and the bench's --host-costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from kernels_real import bench  # noqa: E402
from kernels_real.host_costs import clocked_call, host_sample, summarize  # noqa: E402


def test_the_clock_names_each_torch_call_and_times_the_gaps() -> None:
    x, w = torch.ones(2, 4), torch.ones(3, 4)

    def layer() -> None:
        y = F.linear(x, w)
        z = y[:, :2].float()
        torch.sort(z.reshape(-1))

    ops, total = clocked_call(layer)
    names = [name for name, _, _ in ops]
    assert names == ["linear", "Tensor.__getitem__", "Tensor.float", "Tensor.reshape", "sort"]
    assert all(inside >= 0 and before >= 0 for _, inside, before in ops)
    assert sum(inside + before for _, inside, before in ops) <= total


def test_summary_takes_medians_of_the_most_common_sequence() -> None:
    samples = [{"plain_us": [10.0, 12.0], "clocked_us": c, "gpu_busy": True,
                "ops": [("linear", c / 2, 1.0), ("silu", c / 4, 0.5)]} for c in (20.0, 24.0, 40.0)]
    samples.append({"plain_us": [100.0], "clocked_us": 99.0, "gpu_busy": False, "ops": [("sort", 1.0, 0.0)]})
    s = summarize(samples)
    assert s["host_only_us"] == 12.0 and s["host_clocked_us"] == pytest.approx(32.0)
    assert s["host_samples"] == 4 and s["host_gpu_busy"] == 0.75 and s["host_ops_sequences"] == 2
    assert s["host_ops"] == [{"name": "linear", "us": 12.0, "before_us": 1.0},
                             {"name": "silu", "us": 6.0, "before_us": 0.5}]
    assert s["host_ops_samples"] == 3
    assert "host_idle_us" not in s  # samples without idle-device calls
    s = summarize([{**x, "idle_us": [5.0 * (k + 1)]} for k, x in enumerate(samples)])
    assert s["host_idle_us"] == pytest.approx(12.5)


def test_a_cpu_sample_times_plain_and_clocked_calls() -> None:
    calls = []
    sample = host_sample(lambda i: calls.append(i) or torch.ones(3).add(1), gpu=False, calls=2)
    assert calls == [0, 1, 2, 0, 1] and len(sample["plain_us"]) == 2 and sample["gpu_busy"]
    assert len(sample["idle_us"]) == 2 and all(x > 0 for x in sample["idle_us"])
    assert [name for name, _, _ in sample["ops"]] == ["ones", "Tensor.add"]


def test_bench_records_host_timings_of_every_interleaved_eager_case(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert bench.main(["--out", str(out), "--device", "cpu", "--quick", "--presets", "qwen3_30b_a3b", "--tokens", "1",
                       "--modes", "eager", "--interleave-eager", "--host-costs", "--trace-presets"]) == 0
    [case] = json.loads((out / "cases.json").read_text())
    assert case["host_samples"] == bench.QUICK_EAGER_ROUNDS and case["host_only_us"] > 0 and case["host_idle_us"] > 0
    assert {"linear", "sort", "Tensor.index_add_"} <= {op["name"] for op in case["host_ops"]}


def test_host_costs_needs_interleaved_eager_timing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--out", str(tmp_path / "run"), "--device", "cpu", "--quick", "--host-costs"]) == 2
    err = capsys.readouterr().err
    assert "--interleave-eager" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()
