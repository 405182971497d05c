"""Alternative sharing form: a fitted pairwise slowdown regression (the fluid model is in ``sharing``).

While kernels overlap, kernel i progresses at ``1 / (1 + Σ_j≠i (bw·bw_i·bw_j + sm·sm_i·sm_j + tc·tc_i·tc_j))``
where (sm, bw, tc) are the solo demands; alone it runs at its solo speed. The three coefficients are fitted
on co-run measurements (``calibration.fit_sharing``).
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
