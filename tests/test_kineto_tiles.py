"""The last round of a persistent GEMM (``simulator.kineto.tiles``), on hand-counted tiles."""

from __future__ import annotations

import pytest

from simulator.kineto.tiles import Tail, last_round, output_tile

QWEN2_GATE_UP_T1 = "nvjet_sm90_tst_192x8_64x8_2x1_v_bz_TNT"


def test_the_tile_is_read_from_an_nvjet_name_and_split_k_is_left_alone():
    assert output_tile(QWEN2_GATE_UP_T1) == (192, 8)
    assert output_tile("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT") == (320, 128)
    assert output_tile("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT") is None
    assert output_tile("_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel") is None


def test_tiles_that_do_not_divide_leave_a_last_round():
    """Qwen2-57B's shared gate_up at one token: N = 40960 in 192-row tiles is 214 tiles (M = 1 fits one 8-token
    tile) on 132 CTAs: 82 CTAs work two tiles, 50 retire at half the kernel's time. At 1024 tokens in 320 x 128
    tiles: 128 x 8 = 1024 tiles, 7 rounds and 100 CTAs in an eighth."""
    assert last_round(QWEN2_GATE_UP_T1, 132, 132, 1, 40960) == Tail(82, 0.5)
    assert last_round("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT", 132, 132, 1024, 40960) == \
        Tail(100, pytest.approx(1 / 8))


@pytest.mark.parametrize(("ctas", "m", "n"), [
    (122, 1, 40960),   # not one CTA per SM: not persistent
    (132, 8, 132 * 192),  # 132 tiles on 132 CTAs: one round, no last round
    (132, 1, 100 * 192),  # fewer tiles than CTAs
    (132, None, 40960),   # no shapes in the trace
])
def test_no_last_round(ctas, m, n):
    assert last_round(QWEN2_GATE_UP_T1, ctas, 132, m, n) is None
