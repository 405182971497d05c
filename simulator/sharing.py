"""How concurrently running kernels share the device: each gets a progress rate in (0, 1].

A kernel's demand is ``(sm, bw, tc)``: the fractions of the SMs, of peak HBM bandwidth and of the tensor
rate it uses when it runs alone. The fluid model gives every running kernel a rate such that, per resource,
the sum of demand × rate stays within the resource's capacity, sharing max-min fairly (water-filling).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Demand = tuple[float, float, float]


class SharingModel(Protocol):
    """Anything that turns the demands of the running kernels into their progress rates."""

    def rates(self, demands: Sequence[Demand]) -> list[float]: ...


@runtime_checkable
class PlacingModel(Protocol):
    """A sharing model that places each kernel once, when it starts, among the kernels running then (where its
    blocks land, and whether they stay there), and gives rates from those placements (in start order). A
    placement with a ``tail`` attribute (not None) says the kernel ends no sooner than that many times its solo
    time after its start (blocks packed for life beside blocks that wait); ``packed_remainder`` says what such a
    kernel holds and draws from when its other blocks are done until then."""

    def place(self, running: Sequence[Any], demand: Demand, geometry: tuple[int, int, int | None] | None,
              kernel: str = "") -> Any: ...

    def placed_rates(self, demands: Sequence[Demand], placements: Sequence[Any]) -> list[float]: ...

    def packed_remainder(self, placed: Any, demand: Demand) -> tuple[Any, Demand]: ...


@dataclass(frozen=True, slots=True)
class FluidSharing:
    """Max-min fair fluid sharing of SMs, HBM bandwidth and tensor rate.

    ``*_capacity`` scale what the resources offer (1 = the solo ceiling). ``overlap_penalty`` takes that
    fraction off every capacity while two or more kernels run at once (cache and scheduler interference).
    """

    sm_capacity: float = 1.0
    bw_capacity: float = 1.0
    tc_capacity: float = 1.0
    overlap_penalty: float = 0.0

    def rates(self, demands: Sequence[Demand]) -> list[float]:
        n = len(demands)
        if n == 1:
            return [self.solo_rate(demands[0])]
        if n == 2:
            return list(self.pair_rates(demands[0], demands[1]))
        capacity = self.shared_capacity()
        if all(sum(d[j] for d in demands) <= capacity[j] for j in range(3)):
            return [1.0] * n
        return water_fill(demands, capacity)

    def solo_rate(self, demand: Demand) -> float:
        """The rate of a kernel running alone: full unless it asks for more of a resource than there is."""
        rate = 1.0
        for d, c in zip(demand, (self.sm_capacity, self.bw_capacity, self.tc_capacity), strict=True):
            if d > c:
                rate = min(rate, c / d)
        return rate

    def pair_rates(self, a: Demand, b: Demand) -> tuple[float, float]:
        """The rates of two kernels running together (the engine's most frequent case, remembered per pair)."""
        sm, bw, tc = capacity = self.shared_capacity()
        if a[0] + b[0] <= sm and a[1] + b[1] <= bw and a[2] + b[2] <= tc:
            return 1.0, 1.0
        rate_a, rate_b = water_fill([a, b], capacity)
        return rate_a, rate_b

    def shared_capacity(self) -> list[float]:
        """What each resource offers while two or more kernels run: the overlap penalty taken off."""
        keep = 1.0 - self.overlap_penalty
        return [self.sm_capacity * keep, self.bw_capacity * keep, self.tc_capacity * keep]


def water_fill(demands: Sequence[Demand], capacity: list[float]) -> list[float]:
    """Raise all unfrozen rates together until a resource saturates or they reach 1; freeze its users."""
    n = len(demands)
    rates = [0.0] * n
    frozen = [False] * n
    left = list(capacity)
    level = 0.0
    while not all(frozen):
        step = 1.0 - level
        bottleneck = -1
        for j in range(3):
            use = sum(demands[i][j] for i in range(n) if not frozen[i])
            if use > 0 and left[j] / use < step:
                step = left[j] / use
                bottleneck = j
        step = max(step, 0.0)
        level += step
        for j in range(3):
            left[j] -= step * sum(demands[i][j] for i in range(n) if not frozen[i])
        for i in range(n):
            if not frozen[i]:
                rates[i] = level
                if bottleneck < 0 or demands[i][bottleneck] > 0:
                    frozen[i] = True
    return [max(r, 1e-12) for r in rates]
