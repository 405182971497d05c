"""calibration.fit_grouped_law: the grouped GEMM's shard law recovered from synthetic layer traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.fit_grouped_law import grouped_shard_law, grouped_specs, terms
from simulator.errors import InputError
from simulator.profile import load_profile

GROUPED = "cutlass_GroupProblemShape_kernel"
TRUE = (8.0, 2.5, 0.4)  # µs per kernel, µs per round, µs per MB (2500 GB/s)


def _write_run(folder: Path, presets: list[str], law: tuple[float, float, float]) -> None:
    profile = load_profile("h200")
    records = []
    for preset in presets:
        for tokens in (1, 2, 4, 16):
            specs = grouped_specs(preset, tokens, profile)
            times = [sum(w * t for w, t in zip(law, terms(specs[role], profile.hardware.sm_count), strict=True))
                     for role in ("grouped_mm_gate_up", "grouped_mm_down")]
            layer = [{"name": "routing_kernel", "dur_us": 3.0}, *({"name": GROUPED, "dur_us": t} for t in times)]
            records.append({"preset": preset, "tokens": tokens, "strategy": "sequential", "mode": "graph",
                            "trace": "t", "layers": 3, "kernels": layer * 3})
    folder.mkdir()
    (folder / "kernels.json.gz").write_bytes(gzip.compress(json.dumps(records).encode()))


def test_the_fit_recovers_the_law_it_was_given(tmp_path: Path) -> None:
    run = tmp_path / "layer_traces"
    _write_run(run, ["qwen2_57b_a14b", "qwen2_57b_a14b@tp4", "llama4_scout@tp2"], TRUE)
    law = grouped_shard_law(run, "synthetic", load_profile("h200"))
    assert law["fixed_us"] == pytest.approx(TRUE[0], rel=1e-3)
    assert law["round_us"] == pytest.approx(TRUE[1], rel=1e-3)
    assert law["stream_GBps"] == pytest.approx(1e3 / TRUE[2], rel=1e-3)
    assert law["slots"] == load_profile("h200").hardware.sm_count
    assert "of shard shapes" in law["source"]


def test_held_out_presets_and_their_ranks_stay_out(tmp_path: Path) -> None:
    run = tmp_path / "layer_traces"
    _write_run(run, ["qwen2_57b_a14b", "qwen2_57b_a14b@tp4"], TRUE)
    with pytest.raises(InputError, match="needs 3"):
        grouped_shard_law(run, "synthetic", load_profile("h200"), holdout_presets=["qwen2_57b_a14b"])
