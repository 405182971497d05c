"""benchmarks/packed_gemv.py on a hand-made layer-trace run: the dot-product GEMV router beside full-SM blocks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.profile import load_profile
from tests.helpers_benchmarks import load_benchmark

pg = load_benchmark("packed_gemv")

DOT = "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<float const>, float>>"
NVJET = "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT"
CAST = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>"


def _kernel(name: str, stream: int, start: float, dur: float, blocks: int, threads: int, regs: int) -> dict:
    return {"name": name, "start_us": start, "dur_us": dur, "stream": stream, "grid": [blocks, 1, 1],
            "block": [threads, 1, 1], "registers per thread": regs, "shared memory": 0}


def _record(strategy: str, router_us: float) -> dict:
    """Two layers; multi_stream: the router (256 blocks of 4 warps, 16 per SM by threads) starts at 2 µs while
    the aux stream's GEMM (128 blocks of 384 threads × 168 registers: one per SM) runs 1-20 µs."""
    layer = [_kernel(CAST, 7, 0.0, 2.0, 40, 128, 32), _kernel(DOT, 7, 2.0, router_us, 256, 128, 28),
             _kernel(CAST, 7, 30.0, 1.0, 40, 128, 32)]
    if strategy == "multi_stream":
        layer.append(_kernel(NVJET, 9, 1.0, 19.0, 128, 384, 168))
    else:  # sequential: everything on one stream, the GEMM first
        layer = [_kernel(NVJET, 7, -20.0, 19.0, 128, 384, 168), *layer]
    return {"preset": "llama4_scout@tp4", "tokens": 1, "strategy": strategy, "mode": "graph",
            "trace": f"traces/{strategy}.json.gz", "layers": 2,
            "kernels": [dict(k, start_us=k["start_us"] + 100.0 * i) for i in range(2) for k in layer]}


def test_the_floor_of_a_packed_dot_kernel_against_its_measured_slowdown(tmp_path: Path) -> None:
    """4 SMs free; the busiest holds min(ceil(256 / 4), 16) = 16 blocks, 64 warps; alone 2 blocks, 8 warps. With
    the profile's figure W (below 8): (64 / W) / (8 / W) = 8×. Measured: 6 µs beside the GEMM over 2 µs alone, 3×:
    the floor lies above it. The GEMM (1-20 µs) held its SMs for 18 µs after the router's start at 2 µs; 256 blocks
    do not all fit on 4 SMs of 16."""
    run = tmp_path / "run"
    run.mkdir()
    records = [_record("sequential", 2.0), _record("multi_stream", 6.0)]
    (run / "kernels.json.gz").write_bytes(gzip.compress(json.dumps(records).encode()))
    profile = load_profile("h200")
    assert profile.issue_warps is not None and profile.issue_warps.value < 8
    [point] = pg.points([run], profile)
    assert point[1:7] == ("llama4_scout@tp4", 1, 256, 4, False, pytest.approx(18.0))
    assert point.measured == pytest.approx(3.0) and point.floor == pytest.approx(8.0)
    assert "1 of 1 points (0 of them with every block packed)" in pg.markdown([run], profile)


def test_a_run_without_such_a_router_is_an_input_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    records = [_record("sequential", 2.0)]
    (run / "kernels.json.gz").write_bytes(gzip.compress(json.dumps(records).encode()))
    with pytest.raises(InputError, match="no traced dot_kernel router"):
        pg.points([run], load_profile("h200"))
