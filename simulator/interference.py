"""Alternative sharing forms (the fluid model is in ``sharing``); each is a ``SharingModel``.

``SlowdownSharing``: a fitted pairwise slowdown regression. While kernels overlap, kernel i progresses at
``1 / (1 + Σ_j≠i (bw·bw_i·bw_j + sm·sm_i·sm_j + tc·tc_i·tc_j))`` where (sm, bw, tc) are the solo demands.

``ResidencySharing``: SMs go by residency, bandwidth by fluid sharing. The engine passes the running kernels in
start order; an earlier kernel keeps the SMs its resident blocks hold, a later one gets the SMs left over
(its rate is capped at free / needed, but never below ``floor``: blocks of a later kernel still slip in as
the earlier kernel's blocks retire or leave room). Under those caps, HBM bandwidth and the tensor rate are
shared max-min fairly. While kernels overlap, HBM offers ``bw_capacity`` in full only when the kernels other
than the most bandwidth-hungry one draw a whole HBM's worth between them; in general it offers
``1 + (bw_capacity - 1) × min(1, Σ bw - max bw)``: a latency-bound kernel drawing 2 % of the bandwidth
beside a streaming GEMM costs that GEMM (almost) nothing, two streaming kernels cost the full loss (or gain).
``contention`` slows every kernel by
1 / (1 + contention × min(1, the others' bandwidth demand)) on top: memory latency grows under a loaded HBM,
which hurts small latency-bound kernels that a pure bandwidth share would leave untouched.
``small_contention`` (when given) replaces ``contention`` for latency-bound kernels (own bandwidth demand below
``small_bw``: the routing kernels), which the co-run data show slowed far more beside a bandwidth-saturating
GEMM than bandwidth-heavy kernels are.

Alone, a kernel always runs at its solo speed (rate 1). Parameters are fitted on co-run measurements
(``calibration.fit_sharing``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Demand = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class SlowdownSharing:
    sm: float = 0.0
    bw: float = 0.0
    tc: float = 0.0

    def rates(self, demands: Sequence[Demand]) -> list[float]:
        if len(demands) < 2:
            return [1.0] * len(demands)
        out = []
        for i, (s_i, b_i, t_i) in enumerate(demands):
            load = sum(self.sm * s_i * s_j + self.bw * b_i * b_j + self.tc * t_i * t_j
                       for j, (s_j, b_j, t_j) in enumerate(demands) if j != i)
            out.append(1.0 / (1.0 + max(load, 0.0)))
        return out


@dataclass(frozen=True, slots=True)
class ResidencySharing:
    floor: float = 0.1
    bw_capacity: float = 1.0
    tc_capacity: float = 1.0
    contention: float = 0.0
    small_contention: float | None = None
    small_bw: float = 0.2

    def rates(self, demands: Sequence[Demand]) -> list[float]:
        """Rates in start order. A kernel that demands nothing (all zero: e.g. a traced kernel whose duration
        already holds its contention) runs at its own speed and takes nothing from the others."""
        using = [i for i, d in enumerate(demands) if any(d)]
        if len(using) < len(demands):
            out = [1.0] * len(demands)
            for i, rate in zip(using, self.rates([demands[i] for i in using]), strict=True):
                out[i] = rate
            return out
        if len(demands) < 2:
            return [1.0] * len(demands)
        caps = sm_caps(demands, self.floor)
        if self.contention or self.small_contention:
            total = sum(d[1] for d in demands)
            caps = [c / (1.0 + self._contention(d) * min(1.0, total - d[1]))
                    for c, d in zip(caps, demands, strict=True)]
        return capped_fill(demands, caps, (self._bw_offered(demands), self.tc_capacity))

    def _bw_offered(self, demands: Sequence[Demand]) -> float:
        """HBM capacity while these kernels overlap: the loss (or gain) grows with what the others draw."""
        bws = [d[1] for d in demands]
        return 1.0 + (self.bw_capacity - 1.0) * min(1.0, sum(bws) - max(bws))

    def _contention(self, demand: Demand) -> float:
        small = self.small_contention is not None and demand[1] < self.small_bw
        return self.small_contention if small else self.contention  # type: ignore[return-value]


def sm_caps(demands: Sequence[Demand], floor: float) -> list[float]:
    """Per kernel (in start order) the rate its SM share allows: 1 if the SMs it needs are still free,
    else free / needed, at least ``floor``; the SMs a kernel holds are its need × that rate."""
    caps, held = [], 0.0
    for sm, _, _ in demands:
        free = max(0.0, 1.0 - held)
        cap = 1.0 if sm <= free + 1e-12 else max(floor, free / sm)
        caps.append(cap)
        held += sm * cap
    return caps


def capped_fill(demands: Sequence[Demand], caps: Sequence[float], capacity: Sequence[float],
                first: int = 1) -> list[float]:
    """Max-min fair rates r_i ≤ caps_i with Σ d_ij·r_i ≤ capacity[k] for the demand columns j = first + k: by
    default (first 1) Σ bw_i·r_i ≤ capacity[0] and Σ tc_i·r_i ≤ capacity[1]."""
    n = len(demands)
    cols = range(first, first + len(capacity))
    rates = [0.0] * n
    frozen = [False] * n
    left = list(capacity)
    level = 0.0
    while not all(frozen):
        live = [i for i in range(n) if not frozen[i]]
        step = min(caps[i] for i in live) - level
        use = [sum(demands[i][j] for i in live) for j in cols]
        saturated = -1
        for k, j in enumerate(cols):
            if use[k] > 0 and left[k] / use[k] < step:
                step, saturated = left[k] / use[k], j
        step = max(step, 0.0)
        level += step
        for k in range(len(left)):
            left[k] -= step * use[k]
        for i in live:
            if caps[i] <= level + 1e-12 or (saturated >= 0 and demands[i][saturated] > 0):
                rates[i] = min(level, caps[i])
                frozen[i] = True
    return [max(r, 1e-12) for r in rates]
