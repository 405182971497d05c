"""GPU test of ``kernels_real.geometry_probe`` (skipped without a GPU): one point's GEMM launches, per stream."""

from __future__ import annotations

import gzip
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pydantic")  # the reading side (calibration.fit_geometry) needs the core install

from calibration.fit_geometry import grouped_keys, launch_geometries, router_key, shared_keys  # noqa: E402
from kernels_real.geometry_probe import Weights, default_points, probe_point  # noqa: E402
from simulator.workloads.presets import get_preset  # noqa: E402

pytestmark = pytest.mark.gpu
PRESET, TOKENS = "deepseek_v2_lite@tp2", 2


def test_probe_records_every_gemm_of_the_layer_on_its_stream(tmp_path):
    """Two streams: the aux stream's shared-expert GEMMs, the main stream's router and grouped GEMMs; the record
    reads back as the launches the shape path asks for (the router's unless cuBLAS ran its dot GEMV)."""
    device = torch.device("cuda")
    record = probe_point(Weights.of(PRESET, device), TOKENS, device)
    assert len(record["streams"]) == 2
    assert all(k["grid"] and k["block"] and k["registers per thread"] for s in record["streams"] for k in s)
    (tmp_path / "geometry.json.gz").write_bytes(gzip.compress(json.dumps({"env": {}, "records": [record]}).encode()))
    doc = launch_geometries([tmp_path / "geometry.json.gz"], "test")
    table, dims = doc["launches"], get_preset(PRESET)
    assert all(TOKENS in table[key] for key in shared_keys(dims))
    assert all(TOKENS * dims.top_k in table[key] for key in grouped_keys(dims))
    assert TOKENS in table.get(router_key(dims), {}) or "1 launches of cuBLAS's dot_kernel left out" in doc["source"]

def test_default_points_skip_rank_variants_the_model_does_not_divide():
    points = default_points()
    assert "qwen15_moe_a27b@ep8" not in points and "qwen15_moe_a27b@ep4" in points
