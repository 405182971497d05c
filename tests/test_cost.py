"""The roofline cost model against hand-computed durations and demands."""

from __future__ import annotations

import json

import pytest

from simulator.cost import (
    CostModel,
    KernelSpec,
    elementwise_grid_share,
    gemm_grid_share,
    kernel_cost,
    padded_flops,
)
from simulator.profile import KernelFamily, Profile, load_profile


def _profile(**family: float) -> Profile:
    """h200-datasheet (4800 GB/s, 989 TFLOP/s) with one family ``f`` of the given parameters."""
    doc = json.loads(load_profile("h200-datasheet").model_dump_json())
    doc["kernel_families"]["f"] = {"latency_us": 3.0, "bw_eff": 0.8, "tc_eff": 0.5, "fill_sat": 0.5,
                                   "tile_m": 64, "tile_n": 128, "source": "test", **family}
    return Profile.model_validate(doc)


def test_memory_bound_kernel() -> None:
    p = _profile()
    c = kernel_cost(KernelSpec("k", "f", bytes=1e9, sm=1.0), p)
    t_mem = 1e9 / (4800e3 * 0.8)  # bytes / (bytes per µs × efficiency) = 260.4167 µs
    assert c.dur_us == pytest.approx(3.0 + t_mem)
    assert c.bw == pytest.approx(1e9 / (3.0 + t_mem) / 4800e3)
    assert c.tc == 0 and c.sm == 1.0


def test_compute_bound_kernel_and_tc_demand() -> None:
    p = _profile()
    c = kernel_cost(KernelSpec("k", "f", flops=1e12, bytes=1e6, sm=1.0), p)
    t_cmp = 1e12 / (989e6 * 0.5)  # 2022.245 µs
    assert c.dur_us == pytest.approx(3.0 + t_cmp)
    assert c.tc == pytest.approx(1e12 / c.dur_us / 989e6)


def test_small_grid_reaches_a_share_of_the_peak() -> None:
    p = _profile()
    full = kernel_cost(KernelSpec("k", "f", bytes=1e8, sm=1.0), p).dur_us - 3.0
    quarter = kernel_cost(KernelSpec("k", "f", bytes=1e8, sm=0.125), p).dur_us - 3.0
    # fill_sat 0.5: a grid on 1/8 of the SMs reaches 1/4 of the peak rate
    assert quarter == pytest.approx(4 * full)
    assert kernel_cost(KernelSpec("k", "f", bytes=1e8, sm=0.125), p).sm == 0.125


def test_row_padding_of_gemms() -> None:
    assert padded_flops(100.0, 1, 64) == 6400.0
    assert padded_flops(100.0, 64, 64) == 100.0
    assert padded_flops(100.0, 65, 64) == pytest.approx(100.0 * 128 / 65)
    assert padded_flops(100.0, None, 64) == 100.0


def test_grid_shares() -> None:
    fam = KernelFamily(latency_us=0, bw_eff=1, tc_eff=1, tile_m=64, tile_n=128, elems_per_block=1024,
                       source="t")
    assert gemm_grid_share(64, 1280, fam, 132) == pytest.approx(10 / 132)
    assert gemm_grid_share(1000, 4096, fam, 132) == 1.0  # 16 × 32 tiles
    assert gemm_grid_share(3, 128, fam, 100, groups=7) == pytest.approx(7 / 100)
    split = fam.model_copy(update={"split_k_depth": 512})
    # 2 output tiles, K = 7168 → up to 14 splits of 512, capped by ceil(132 / 2) = 66 → 28 blocks
    assert gemm_grid_share(64, 256, split, 132, depth=7168) == pytest.approx(28 / 132)
    assert elementwise_grid_share(10 * 1024, fam, 100) == pytest.approx(0.1)
    assert elementwise_grid_share(1, fam, 100) == pytest.approx(0.01)


def test_cost_model_launch() -> None:
    p = _profile()
    op = CostModel(p).launch(KernelSpec("k", "f", bytes=1e9, reads=("a",), writes=("b",)), "main", "r")
    assert op.stream == "main" and op.family == "f" and op.region == "r"
    assert op.reads == ("a",) and op.writes == ("b",)
    assert 0 < op.bw <= 1 and op.dur_us > 260
