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
    import torch

    from calibration.microbench.timing import gated_spans

    x = torch.randn(1 << 24, device="cuda")
    gate, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    gated_spans(torch, gate, [(s1, [lambda: x.mul(2.0)]), (s2, [lambda: x[:256].mul(2.0)])])  # warm-up: lazy
    # module loading and the first allocations can outlast the gate in a fresh process
    (one,), held = gated_spans(torch, gate, [(s1, [lambda: x.mul(2.0)])])
    (two,), _ = gated_spans(torch, gate, [(s1, [lambda: x.mul(2.0), lambda: x.mul(2.0)])])
    (big, small), _ = gated_spans(torch, gate, [(s1, [lambda: x.mul(2.0)]), (s2, [lambda: x[:256].mul(2.0)])])
    assert held
    assert 1.5 * one < two < 2.6 * one
    assert small < 0.5 * big  # the small lane did not wait for the big one


def test_staggered_spans_measure_the_later_lanes_delay():
    import torch

    from calibration.microbench.timing import STAGGER_CYCLES, staggered_spans

    x = torch.randn(1 << 24, device="cuda")
    gate, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    lanes = [(s1, [lambda: x.mul(2.0)], 0), (s2, [lambda: x[:256].mul(2.0)], STAGGER_CYCLES)]
    staggered_spans(torch, gate, lanes)  # warm-up
    ((a0, a1), (b0, b1)), held = staggered_spans(torch, gate, lanes)
    assert held
    assert 0.5 < b0 - a0 < 10.0  # ~2 µs of sleep on the later lane
    assert a0 < a1 and b0 < b1
