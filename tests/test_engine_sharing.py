"""FluidSharing's one- and two-kernel cases (the engine's fast path) by hand, and against the general solver."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.sharing import FluidSharing, water_fill


def test_solo_rate_is_capped_by_the_scarcest_resource():
    """bw 0.5 on a 0.4 bandwidth ceiling: 0.4 / 0.5 = 0.8; sm 0.9 fits."""
    assert FluidSharing(bw_capacity=0.4).solo_rate((0.9, 0.5, 0.0)) == pytest.approx(0.8)
    assert FluidSharing().solo_rate((1.0, 1.0, 1.0)) == 1.0


def test_pair_rates_by_hand():
    """Fitting pair: both at full rate. bw 0.6 + 0.6 on 1.0: both slow to 1 / 1.2. With a 0.1 overlap penalty,
    0.5 + 0.45 bw no longer fits 0.9: both at 0.9 / 0.95."""
    assert FluidSharing().pair_rates((0.3, 0.4, 0.0), (0.5, 0.5, 0.0)) == (1.0, 1.0)
    assert FluidSharing().pair_rates((0.1, 0.6, 0.0), (0.1, 0.6, 0.0)) == pytest.approx((1 / 1.2, 1 / 1.2))
    penalised = FluidSharing(overlap_penalty=0.1).pair_rates((0.0, 0.5, 0.0), (0.0, 0.45, 0.0))
    assert penalised == pytest.approx((0.9 / 0.95, 0.9 / 0.95))


fractions = st.floats(0.0, 1.0)
demands = st.tuples(fractions, fractions, fractions)
models = st.builds(FluidSharing, sm_capacity=st.sampled_from([1.0, 0.8]), bw_capacity=st.sampled_from([1.0, 0.6]),
                   overlap_penalty=st.sampled_from([0.0, 0.1]))


@given(models, demands, demands)
def test_pair_rates_are_the_general_solution(model, a, b):
    """Exactly what the water-filling of the two demands on the penalised capacities gives, or 1 where they fit."""
    capacity = model.shared_capacity()
    fits = all(a[j] + b[j] <= capacity[j] for j in range(3))
    assert list(model.pair_rates(a, b)) == ([1.0, 1.0] if fits else water_fill([a, b], capacity))
    assert model.rates([a, b]) == list(model.pair_rates(a, b))
