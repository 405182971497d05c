"""Bytes/flops accounting, derived by hand."""

from __future__ import annotations

import pytest

from calibration.microbench import accounting, shapes


def test_gemm_bytes_and_flops():
    b, f = accounting.cost(shapes.gemm_spec(2, 3, 5))
    assert b == 2 * (2 * 3 + 3 * 5 + 2 * 5)  # x, W, out in bf16
    assert f == 2 * 2 * 3 * 5


def test_grouped_gemm_reads_only_active_experts():
    spec = {"family": "grouped_gemm", "op": "grouped_mm", "E": 4, "K": 8, "N": 16, "counts": [3, 0, 1, 0]}
    b, f = accounting.cost(spec)
    rows, active = 4, 2
    assert b == 2 * (rows * 8 + active * 8 * 16 + rows * 16) + 4 * 4
    assert f == 2 * rows * 8 * 16


@pytest.mark.parametrize(("spec", "nbytes"), [
    (shapes.elementwise_spec("add", 4, 10), 3 * 2 * 40),
    (shapes.elementwise_spec("silu", 4, 10), 2 * 2 * 40),
    (shapes.topk_spec(2, 64, 8), 4 * 2 * 64 + 12 * 2 * 8),
    (shapes.sort_spec(10), 240),
    (shapes.reduction_spec(2, 8, 16), 2 * (2 * 8 * 16 + 2 * 16)),
    (shapes.gather_spec(2, 8, 16), 2 * (2 * 16 + 16 * 16) + 8 * 16),
    (shapes.copy_spec(1000), 2000),
])
def test_memory_bound_bytes(spec, nbytes):
    assert accounting.cost(spec)[0] == nbytes


def test_routing_ops_bytes_and_flops_by_hand():
    f32 = {"op": "mm_f32", "M": 2, "K": 3, "N": 5}
    assert accounting.cost(f32) == (4 * (6 + 15 + 10), 60)  # x, W, out in fp32; 2 x 2 x 3 x 5 flops
    assert accounting.cost({"op": "softmax", "M": 2, "E": 64}) == (4 * 128 * 2, 4 * 128)  # logits in, probs out
    assert accounting.cost({"op": "sigmoid", "M": 1, "E": 256}) == (2048, 1024)
    assert accounting.cost({"op": "scatter_add", "n": 8, "E": 256}) == (8 * 8 + 4 * 8 + 4 * 256 * 2, 8)
    assert accounting.cost({"op": "cumsum", "E": 64}) == (512, 64)  # int32 in and out
    # 1 token, top-8, hidden 3584: 8 fp32 rows in, [1, 3584] fp32 read and written, 8 int64 indices
    assert accounting.cost({"op": "index_add", "M": 1, "k": 8, "N": 3584}) == (
        4 * 8 * 3584 + 2 * 4 * 3584 + 64, 8 * 3584)
    assert accounting.cost({"op": "silu_half", "M": 8, "N": 10}) == (2 * 2 * 80, 320)
    assert accounting.cost({"op": "mul_half", "M": 8, "N": 10}) == (3 * 2 * 80, 80)


def test_fp32_router_weight_sets_the_rotations():
    spec = {"op": "mm_f32", "M": 1, "K": 7168, "N": 256}  # 7 MiB fp32 weight -> ceil(240 / 7) = 35
    assert accounting.rotations(spec, 60 << 20) == 35


def test_chain_sums_its_parts():
    a, b = shapes.gemm_spec(1, 4, 4), shapes.copy_spec(100)
    assert accounting.cost(shapes.chain_spec([a, b], "t")) == (2 * (4 + 16 + 4) + 200, 32)


def test_unknown_op_is_rejected():
    with pytest.raises(ValueError, match="unknown op"):
        accounting.cost({"op": "fft"})


def test_rotations_cover_four_l2_and_are_capped():
    l2 = 60 << 20
    router = shapes.gemm_spec(1, 7168, 256)  # 3.5 MiB weight -> 240 MiB / 3.5 MiB = 68.6 -> capped at 64
    assert accounting.rotations(router, l2) == 64
    mid = shapes.gemm_spec(1, 7168, 4096)  # 56 MiB weight -> ceil(240 / 56) = 5
    assert accounting.rotations(mid, l2) == 5
    huge = shapes.gemm_spec(1, 3584, 40960)  # 280 MiB > 4 x L2
    assert accounting.rotations(huge, l2) == 1
    assert accounting.rotations(mid, 0) == 1
