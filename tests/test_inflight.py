"""The memory-level-parallelism sharing form against rates derived by hand (module docstring's formulas)."""

from __future__ import annotations

import pytest

from simulator.inflight import InflightSharing


def test_alone_a_kernel_runs_at_solo_speed():
    assert InflightSharing(inflight_full=4.0, latency_share=0.9).rates([(1.0, 1.0, 1.0)]) == [1.0]


def test_two_latency_bound_gemvs_that_fit_the_bandwidth_delay_product_both_run_full_speed():
    """φ = 0.4 each (sm 0.3 < 1/κ): Σφ = 0.8 < 1, the latency does not grow."""
    assert InflightSharing(inflight_full=1.0).rates([(0.3, 0.4, 0.0), (0.3, 0.4, 0.0)]) == [1.0, 1.0]


def test_two_streaming_kernels_split_the_bandwidth():
    """φ = 0.9 each, Σφ = 1.8: memory progresses at 1/1.8; 90 % of each kernel's time is memory:
    rate = 1 / (0.1 + 0.9 × 1.8) = 1 / 1.72 (their slots, 0.5 + 0.5, fit together)."""
    model = InflightSharing(inflight_full=1.0)
    a, b = model.rates([(0.5, 0.9, 0.0), (0.5, 0.9, 0.0)])
    assert a == pytest.approx(1 / 1.72)
    assert b == pytest.approx(1 / 1.72)


def test_a_latency_bound_kernel_waits_behind_an_oversubscribing_gemv():
    """Small (sm .01, bw .01) first, a slot-filling GEMV (sm 1, bw .9, κ 3) second: the GEMV gets .99 of the
    slots, φ = .9 × 3 × .99 = 2.673; Σφ = 2.683. Small: half its time is memory: 1 / (.5 + .5 × 2.683).
    GEMV: memory at 2.673 / 2.683, 90 % memory: 1 / (.1 + .9 × 2.683 / 2.673), capped at its .99 of slots."""
    small, gemv = InflightSharing(inflight_full=3.0, latency_share=0.5).rates([(0.01, 0.01, 0.0), (1.0, 0.9, 0.0)])
    assert small == pytest.approx(1 / (0.5 + 0.5 * 2.683))
    assert gemv == pytest.approx(min(0.99, 1 / (0.1 + 0.9 * 2.683 / 2.673)))


def test_tensor_bound_kernels_share_the_tensor_rate():
    """Two kernels each using 80 % of the tensor rate, no memory: max-min share, 1 / 1.6 each."""
    a, b = InflightSharing().rates([(0.2, 0.0, 0.8), (0.2, 0.0, 0.8)])
    assert a == pytest.approx(1 / 1.6)
    assert b == pytest.approx(1 / 1.6)
