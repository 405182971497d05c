"""benchmarks/grouped_context.py: the probe's contexts beside the profile's solo time and the layer's kernel."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

grouped_context = load_benchmark("grouped_context")

CONTEXTS = grouped_context.CONTEXTS


def _probe(folder: Path) -> Path:
    folder.mkdir()
    record = {"preset": "llama4_scout", "tokens": 1, "experts_hit": 1,
              "median_us": {c: 60.0 + i for i, c in enumerate(CONTEXTS)}}
    env = {"device_name": "GPU X", "torch": "t", "nvidia_smi": {"driver_version": "d"}}
    (folder / "grouped_context_probe.json").write_text(json.dumps({"env": env, "records": [record]}))
    return folder


def _traces(folder: Path) -> Path:
    """Two sets, four layers: set 0's gate_up kernels (layers 0 and 2) run 10 and 12 µs, set 1's 90."""
    folder.mkdir()
    grouped = "cutlass GroupProblemShape"
    kernels = []
    for gate_up in (10.0, 90.0, 12.0, 90.0):
        kernels += [{"name": "nvjet", "dur_us": 5.0}, {"name": grouped, "dur_us": gate_up},
                    {"name": grouped, "dur_us": 7.0}]
    recs = [{"preset": "llama4_scout", "tokens": 1, "strategy": "sequential", "layers": 4, "kernels": kernels},
            {"preset": "llama4_scout", "tokens": 1, "strategy": "multi_stream", "layers": 4, "kernels": []}]
    (folder / "kernels.json.gz").write_bytes(gzip.compress(json.dumps(recs).encode()))
    (folder / "cases.json").write_text(json.dumps([{"preset": "llama4_scout", "tokens": 1, "weight_sets": 2}]))
    return folder


def test_layer_time_is_set_zero_gate_up_median(tmp_path: Path) -> None:
    assert grouped_context.layer_gate_up_us(_traces(tmp_path / "t")) == {("llama4_scout", 1): 11.0}


def test_table_has_every_context_the_solo_time_and_the_layer(tmp_path: Path) -> None:
    text = grouped_context.markdown(_probe(tmp_path / "p"), _traces(tmp_path / "t"), "h200")
    row = next(line for line in text.splitlines() if line.startswith("| llama4_scout"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:3 + len(CONTEXTS)] == [f"{60.0 + i:.1f}" for i in range(len(CONTEXTS))]
    solo = grouped_context.profile_gate_up_us(grouped_context.load_profile("h200"), "llama4_scout", 1, 1)
    assert cells[-2] == f"{solo:.1f}" and solo > 0
    assert cells[-1] == "11.0"
    assert "GPU X, driver d" in text and "Not run on AMD hardware" in text


def test_missing_probe_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert grouped_context.main(["--probe", str(tmp_path)]) == 2
    assert "no grouped_context_probe.json" in capsys.readouterr().err
