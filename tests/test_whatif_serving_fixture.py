"""``python -m kernels_real.serving_fixture`` on CPU: tiny shapes, eager only, no timing; the traces carry the
module calls a vLLM trace carries (and no record_function ranges), which the what-if's importer reads."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kernels_real import serving_fixture
from simulator.kineto.program import module_ranges
from simulator.kineto.reader import read_trace


def test_cpu_run_writes_traces_and_a_record_without_timing(tmp_path: Path) -> None:
    out = tmp_path / "fx"
    assert serving_fixture.main(["--out", str(out), "--device", "cpu", "--steps", "2", "--moe-layers", "2"]) == 0
    record = json.loads((out / "fixture.json").read_text())
    assert record["traces"] == {"sequential_eager": "sequential_eager.json.gz",
                                "multi_stream_eager": "multi_stream_eager.json.gz"}
    assert record["measured_forward_us"] is None and "no timing" in record["timing"]
    assert record["env"]["torch"] and record["env"]["backend"] == "cpu"
    doc = json.loads(gzip.decompress((out / "sequential_eager.json.gz").read_bytes()))
    assert doc["moesim_layers_per_trace"] == 2
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    trace = read_trace(out / "sequential_eager.json.gz", progress=False)
    classes = Counter(r.name for r in trace.modules)
    # per step: 3 decoder layers; MLPs: the dense one + one shared-experts MLP per MoE layer
    assert classes["DeepseekV2DecoderLayer"] == 2 * 3 and classes["DeepseekV2MLP"] == 2 * 3
    assert classes["DeepseekV2MoE"] == classes["FusedMoE"] == classes["ReplicatedLinear"] == 2 * 2
    paths = Counter(r.name for r in module_ranges(trace, trace.modules[0].tid))
    root = "DeepseekV2ForCausalLM/DeepseekV2Model/DeepseekV2DecoderLayer"
    assert paths[f"{root}/DeepseekV2MoE/DeepseekV2MLP"] == 4 and paths[f"{root}/DeepseekV2MLP"] == 2


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert serving_fixture.main(["--out", str(tmp_path), "--device", "cpu", "--steps", "0"]) == 2
    assert serving_fixture.main(["--out", str(tmp_path), "--device", "cpu", "--preset", "qwen3_30b_a3b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "must be >= 1" in err[0] and "no shared experts" in err[1]
