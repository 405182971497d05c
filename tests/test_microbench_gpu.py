"""GPU checks of the measuring primitives (skipped without a CUDA/ROCm device)."""

from __future__ import annotations

import pytest

from calibration.microbench import shapes

pytestmark = pytest.mark.gpu


def test_solo_copy_time_is_consistent_with_bytes_moved():
    import torch

    from calibration.microbench import solo

    dev = torch.device("cuda")
    rec = solo.measure(torch, shapes.copy_spec(256 << 20), dev, 60 << 20, {}, reps=3)
    assert rec["median_us"] > 0
    gbps = rec["bytes"] / rec["median_us"] / 1e3
    assert 100 < gbps < 20_000  # anything outside is a timing bug, not a GPU


def test_gated_spans_start_lanes_together():
    """Two one-block sleep kernels on two lanes fit on the device side by side: if the gate starts both lanes
    together, each lane's span is about one sleep, not two. (Grid-filling kernels are no use here: which of
    two such kernels the block scheduler serves first is up to the hardware — call 3 of 2026-12-02 saw the
    small one wait behind the big one.)"""
    import torch

    from calibration.microbench.timing import gated_spans

    gate, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()

    def nap() -> None:
        torch.cuda._sleep(200_000)  # one block, ~100 µs

    gated_spans(torch, gate, [(s1, [nap]), (s2, [nap])])  # warm-up: lazy module loading, first allocations
    (one,), held = gated_spans(torch, gate, [(s1, [nap])])
    (two,), _ = gated_spans(torch, gate, [(s1, [nap, nap])])
    (a, b), held_both = gated_spans(torch, gate, [(s1, [nap]), (s2, [nap])])
    assert held and held_both
    assert 1.5 * one < two < 2.6 * one
    assert max(a, b) < 1.5 * one  # the lanes ran side by side from one start


def test_staggered_spans_measure_the_later_lanes_delay():
    """With one-block kernels on both lanes (SMs stay free), the later lane begins about its ~2 µs stagger
    after the first. (Beside a grid-filling kernel the later lane's begin can slip further: the co-run
    records measure that gap, offset_us, rather than assume it.)"""
    import torch

    from calibration.microbench.timing import STAGGER_CYCLES, staggered_spans

    gate, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()

    def nap() -> None:
        torch.cuda._sleep(100_000)  # one block, ~50 µs

    lanes = [(s1, [nap], 0), (s2, [nap], STAGGER_CYCLES)]
    staggered_spans(torch, gate, lanes)  # warm-up
    ((a0, a1), (b0, b1)), held = staggered_spans(torch, gate, lanes)
    assert held
    assert 0.5 < b0 - a0 < 10.0  # ~2 µs of sleep on the later lane
    assert a0 < a1 and b0 < b1
