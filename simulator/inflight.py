"""Co-run sharing by memory-level parallelism: HBM as a latency-bandwidth system (Little's law), SM slots by residency,
the tensor rate shared max-min.

A kernel reaches the bandwidth its bytes in flight allow: ``achieved = in_flight / latency``, up to what the HBM
delivers. Let ``φ`` be a kernel's bytes in flight over the bandwidth-delay product (``sat_bw`` × the unloaded
latency). A kernel that alone draws less than ``sat_bw`` is latency-bound, ``φ = bw / sat_bw``; a kernel's in-flight
bytes grow with the SM slots it holds, so one that holds many keeps more in flight than it needs: ``φ = bw / sat_bw
× max(1, inflight_full × sm)``, where ``inflight_full`` is how many times the bytes it needs a streaming kernel
keeps in flight when it holds every SM slot. While kernels overlap, the loaded latency is ``max(1, Σ φ)`` times the
unloaded one, so each kernel's memory traffic progresses at ``max(1, φ_i) / max(1, Σ φ)`` of its solo pace: two
GEMVs that each reach 40 % of the bandwidth both run at full speed; two streaming kernels split it; a latency-bound
kernel beside an oversubscribing GEMV waits ``Σ φ`` times longer per memory round trip. A kernel spends ``m_i =
max(bw_i / sat_bw, latency_share)`` of its solo time on memory (a streaming kernel all of it, a latency-bound one
``latency_share``), so its rate is ``1 / ((1 - m_i) + m_i / mem_rate_i)``.

SM slots go by residency in start order (``interference.sm_caps``: a later kernel gets the slots left, at least
``floor`` of its need); the tensor rate is shared max-min under those rates. Alone, a kernel runs at its solo speed
(rate 1). The parameters are hardware quantities: ``sat_bw`` (saturated HBM throughput, a fraction of the profile's
measured copy ceiling), ``inflight_full`` (in-flight bytes of a slot-filling streaming kernel over what it needs),
``latency_share`` (fraction of a latency-bound kernel's solo time spent in DRAM round trips), ``floor`` (share of
its slots a later kernel obtains behind a slot-filling one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.interference import capped_fill, sm_caps

Demand = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class InflightSharing:
    sat_bw: float = 1.0
    inflight_full: float = 1.0
    latency_share: float = 0.0
    floor: float = 0.05
    tc_capacity: float = 1.0

    def inflight(self, demand: Demand) -> float:
        """φ: the kernel's bytes in flight in bandwidth-delay products."""
        sm, bw, _ = demand
        return bw / self.sat_bw * max(1.0, self.inflight_full * sm)

    def rates(self, demands: Sequence[Demand]) -> list[float]:
        """Rates in start order (a kernel demanding nothing runs at its own speed and takes nothing)."""
        if len(demands) < 2:
            return [1.0] * len(demands)
        caps = sm_caps(demands, self.floor)
        phis = [self.inflight(d) * c for d, c in zip(demands, caps, strict=True)]
        loaded = max(1.0, sum(phis))
        out = []
        for d, phi, cap in zip(demands, phis, caps, strict=True):
            if not any(d):
                out.append(1.0)
                continue
            mem_rate = max(1.0, phi) / loaded
            share = min(1.0, max(d[1] / self.sat_bw, self.latency_share))
            out.append(min(cap, 1.0 / ((1.0 - share) + share / mem_rate)))
        if sum(d[2] * r for d, r in zip(demands, out, strict=True)) <= self.tc_capacity:
            return out
        return capped_fill([(d[0], 0.0, d[2]) for d in demands], out, (1.0, self.tc_capacity))
