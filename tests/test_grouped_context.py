"""benchmarks/grouped_context.py: the probe's contexts beside the profile's solo time and the layer's kernel."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark

grouped_context = load_benchmark("grouped_context")

CONTEXTS = ("chain", "flush", "x_warm", "gather", "spin", "dense", "other_expert")


def _probe(folder: Path) -> Path:
    folder.mkdir()
    record = {"preset": "llama4_scout", "tokens": 1, "experts_hit": 1, "K": 5120, "N": 16384,
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


def _microbench(path: Path) -> Path:
    """Scout's gate_up shape at 1 token (one expert hit, two rotations) and at 2; a dense shape ignored."""
    solo = [{"shape": {"op": "grouped_mm", "E": 16, "K": 5120, "N": 16384, "tokens": 1, "counts": [0] * 11 + [1]},
             "median_us": 81.0, "rotations": 2},
            {"shape": {"op": "grouped_mm", "E": 16, "K": 5120, "N": 16384, "tokens": 2, "counts": [1, 0, 1]},
             "median_us": 150.0, "rotations": 1},
            {"shape": {"op": "mm", "M": 1, "K": 5120, "N": 16384}, "median_us": 40.0}]
    path.write_bytes(gzip.compress(json.dumps({"solo": solo}).encode()))
    return path


def test_microbench_column_matches_shape_and_tokens(tmp_path: Path) -> None:
    bench = grouped_context.microbench_grouped(_microbench(tmp_path / "mb.json.gz"))
    assert bench == {(16, 5120, 16384, 1): (81.0, 1, 2), (16, 5120, 16384, 2): (150.0, 2, 1)}
    text = grouped_context.markdown(_probe(tmp_path / "p"), None, "h200", tmp_path / "mb.json.gz")
    row = next(line for line in text.splitlines() if line.startswith("| llama4_scout"))
    assert row.rstrip().endswith("| 81.0 (1, 2) |")


def test_placements_table_summarises_the_copies(tmp_path: Path) -> None:
    spread = [{"address": i, "per_call_us": us} for i, us in enumerate((72.0, 80.0, 84.0, 76.0))]
    doc = {"env": {"device_name": "GPU X"},
           "per_call_us": {"t1 layer": 71.5, "t1 randn_x": 84.0, "t1 randn_w": 72.4, "t1 placements": spread}}
    path = tmp_path / "rotation_check.json"
    path.write_text(json.dumps(doc))
    row = next(line for line in grouped_context.placements_markdown(path).splitlines() if line.startswith("| 1 |"))
    assert row == "| 1 | 71.5 | 84.0 | 72.4 | 72.0 / 78.0 / 78.0 / 84.0 |"


def test_bad_microbench_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text("not json")
    assert grouped_context.main(["--probe", str(_probe(tmp_path / "p")), "--microbench",
                                 str(tmp_path / "bad.json")]) == 2
    assert "not a microbench.json" in capsys.readouterr().err
