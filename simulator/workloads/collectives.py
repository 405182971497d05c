"""Collective-communication kernels (all-reduce, all-to-all) timed from the profile's link figures.

A collective kernel holds a few SMs (``COMM_SM``), moves its payload over the inter-GPU link and touches
little HBM; so while it waits on the link most of the device is free, and a kernel on another stream (the
shared expert on aux) can fill it. Solo time = link latency + payload on the wire / per-GPU bandwidth:

- all-reduce of ``B`` bytes over ``n`` ranks (ring / reduce-scatter + all-gather bound): each GPU sends
  ``2·(n−1)/n · B``;
- all-to-all where each rank holds ``B`` bytes of rows, spread evenly over the ``n`` ranks: each GPU sends
  the ``(n−1)/n · B`` that leave it.

The link bandwidth is the profile's per-direction aggregate per GPU (NVSwitch: any pattern reaches it;
MI300X xGMI full mesh: only when every peer link is busy, which an even all-to-all does).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.ir import Launch
from simulator.profile import Profile

COMM_SM = 0.15  # share of the SMs/CUs a collective kernel's grid occupies (e.g. 20–48 CTAs on 132–304 SMs)


@dataclass(frozen=True)
class LinkFigures:
    """Per-GPU, per-direction link bandwidth (GB/s) and the base latency of one collective (µs)."""

    bandwidth_GBps: float
    latency_us: float

    @classmethod
    def of(cls, profile: Profile, bandwidth_GBps: float | None = None,
           latency_us: float | None = None) -> LinkFigures:
        """The profile's link, with optional overrides."""
        link = profile.link
        return cls(bandwidth_GBps if bandwidth_GBps is not None else link.bandwidth_GBps.value,
                   latency_us if latency_us is not None else link.latency_us.value)

    def transfer_us(self, wire_bytes: float) -> float:
        return self.latency_us + wire_bytes / (self.bandwidth_GBps * 1e3)


def all_reduce_us(link: LinkFigures, ranks: int, nbytes: float) -> float:
    """Solo time of an all-reduce of ``nbytes`` per rank over ``ranks`` GPUs (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return link.transfer_us(2.0 * (ranks - 1) / ranks * nbytes)


def all_to_all_us(link: LinkFigures, ranks: int, nbytes: float) -> float:
    """Solo time of an even all-to-all where each rank holds ``nbytes`` (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return link.transfer_us((ranks - 1) / ranks * nbytes)


def comm_launch(name: str, dur_us: float, nbytes: float, profile: Profile, stream: str, reads: tuple[str, ...],
                writes: tuple[str, ...]) -> Launch:
    """A collective as a launch: ``COMM_SM`` of the SMs, HBM demand from reading the send buffer and
    writing the receive buffer (``2·nbytes``) over its duration, no tensor work."""
    bw = min(1.0, 2.0 * nbytes / max(dur_us, 1e-9) / profile.hbm_bytes_per_us)
    return Launch(kernel=name, stream=stream, dur_us=dur_us, sm=COMM_SM, bw=bw, tc=0.0, reads=reads,
                  writes=writes, family="collective")
