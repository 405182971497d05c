"""Timing statistics, budget and chain gaps (pure)."""

from __future__ import annotations

import pytest

from calibration.microbench import stats
from calibration.microbench.budget import Budget


def test_summarize_percentiles_of_a_known_list():
    s = stats.summarize([float(x) for x in range(11)])  # 0..10
    assert s == {"median_us": 5.0, "p10_us": 1.0, "p90_us": 9.0, "n": 11}


def test_summarize_rejects_empty():
    with pytest.raises(ValueError):
        stats.summarize([])


def test_chain_per_call_cancels_the_fixed_cost():
    # fixed cost 7 µs, 3 µs per call: T(4) = 19, T(8) = 31 -> (31 - 19) / 4 = 3
    assert stats.chain_per_call([19.0, 19.5], [31.0, 31.5], 4) == [3.0, 3.0]
    with pytest.raises(ValueError):
        stats.chain_per_call([1.0], [1.0], 0)


def test_chain_length_targets_a_replay_length_within_bounds():
    assert stats.chain_length(100.0) == 10
    assert stats.chain_length(1.0) == 64
    assert stats.chain_length(5000.0) == 4
    assert stats.chain_length(0.0) == 64


def test_gaps_from_a_hand_made_chain():
    # kernels of 2 µs starting at 0, 3, 7: gaps 1 and 2 -> mean 1.5, span 9, busy 6
    g = stats.gaps([(3.0, 2.0), (0.0, 2.0), (7.0, 2.0)])
    assert g == {"mean_gap_us": 1.5, "median_gap_us": 1.5, "median_kernel_us": 2.0, "count": 3}
    assert stats.gaps([(0.0, 1.0)]) is None


def test_budget_stages_and_skips():
    now = [100.0]
    b = Budget(10.0, clock=lambda: now[0])
    b.stage(0.5)
    assert b.left() == pytest.approx(5.0)
    now[0] = 106.0
    assert b.expired()
    b.stage(1.0)
    assert not b.expired()
    assert b.left() == pytest.approx(4.0)
    b.skip("solo", 3)
    b.skip("solo", 0)
    assert b.notes() == ["budget of 10 s reached: skipped 3 solo item(s)"]
    with pytest.raises(ValueError):
        Budget(0)
