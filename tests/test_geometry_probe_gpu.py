"""GPU test of ``kernels_real.geometry_probe`` (skipped without a GPU): one point's GEMM launches, per stream."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from calibration.fit_geometry import launch_geometries, router_key, shared_keys  # noqa: E402
from kernels_real.geometry_probe import probe_point  # noqa: E402
from simulator.workloads.presets import get_preset  # noqa: E402

pytestmark = pytest.mark.gpu


def test_probe_records_the_shared_gemms_and_the_router_on_their_streams(tmp_path):
    """Two streams of GEMMs: the aux stream's two shared-expert GEMMs and the main stream's router; the records
    read back as the launches the shape path asks for."""
    import gzip
    import json

    record = probe_point("deepseek_v2_lite@tp2", 2, torch.device("cuda"))
    sizes = sorted(len(s) for s in record["streams"])
    assert sizes == [1, 2]
    assert all(k["grid"] and k["block"] and k["registers per thread"] for s in record["streams"] for k in s)
    (tmp_path / "geometry.json.gz").write_bytes(gzip.compress(json.dumps({"env": {}, "records": [record]}).encode()))
    table = launch_geometries([tmp_path / "geometry.json.gz"], "test")["launches"]
    dims = get_preset("deepseek_v2_lite@tp2")
    assert all(2 in table[key] for key in shared_keys(dims))
    router = next(k for s in record["streams"] if len(s) == 1 for k in s)
    assert ("dot_kernel" in router["kernel"]) or 2 in table[router_key(dims)]
