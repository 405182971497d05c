"""Block placement: where a kernel's thread blocks land on the SMs when it starts, and whether they stay.

A kernel whose launch geometry is known has ``blocks`` thread blocks, of which one SM holds ``per_sm`` at once
(occupancy rules: registers, threads, shared memory). Alone, its blocks spread one per SM over
``min(blocks, SMs)`` SMs: its *spread*. Beside kernels already running:

- a kernel of **full-SM blocks** (``per_sm`` = 1: e.g. cuBLAS / CUTLASS tensor-core GEMMs, one block holding an
  SM's whole register file) gets only SMs no other block touches; its blocks that find none start as the SMs
  free up, so its SM share is re-solved whenever a kernel ends;
- a kernel of **light blocks** (``per_sm`` > 1) also fits beside other light blocks, but not on SMs held by
  full-SM blocks. When its blocks fit on the SMs left to it only by packing several per SM, they are packed
  there at launch and **stay** there for its whole life, even after the kernels that crowded it have ended (the
  layer traces' fp32 router GEMM beside the shared experts). How much slower it runs is set by the busiest SM,
  which holds ceil(blocks / SMs left) of its blocks (alone: ceil(blocks / SMs)): an SM runs ``issue_warps``
  resident warps at full speed (a measured figure per kernel class where the profile has one, :func:`issue_class`:
  kernels of small tiles whose warps mostly wait, as cuBLAS's xmma FFMA GEMMs, take many more warps to fill an SM
  than CUTLASS's SIMT sgemm), and a block's time stretches as the SM's warps exceed that, so the kernel runs at
  :func:`packing_slowdown` of its solo rate (without ``issue_warps`` or the block's warps: (SMs left) / spread,
  the blocks' share of the SMs). When even packing leaves blocks over, the blocks that fit are packed onto the
  SMs left, as many per SM as occupancy allows, and stay; the rest wait, and its share is re-solved as SMs free
  up; it ends no sooner than its packed blocks (``Placed.tail``: the engine holds its end to the packing
  slowdown of an SM holding that many times its solo time). Once the waiting blocks are done, it holds only the
  SMs of its packed blocks until they end (:meth:`PlacementSharing.packed_remainder`): a GEMM launched after it
  gets the SMs its waiting blocks ran on.

A kernel whose blocks find no SM waits (rate 0) until SMs free up. Light kernels that are not packed have blocks
that retire and are replaced while they run, so they share the SMs no full-SM block holds max-min fairly by their
spreads (two kernels spread over the whole GPU each run at half speed). Under those SM caps, HBM bandwidth and
the tensor rate are shared max-min fairly as in :class:`~simulator.interference.ResidencySharing`
(``bw_capacity``, ``tc_capacity``). A kernel without a known geometry (the trace path gives it to GEMM kernels
only: their blocks keep an SM's issue slots busy; other kernels' blocks mostly wait on memory) takes its ``sm``
demand as its spread and counts as light, never packed. Such a kernel is taken as latency-bound: with
``memory_latency`` (the profile's measured curve) its rate is divided by the slowdown the curve gives for the
share of HBM the other running kernels draw. A kernel that demands nothing (a traced kernel whose duration
already holds its contention) runs at its own speed. How much a latency-bound kernel slows depends on how much of
its time is spent on round trips to memory rather than on chip (:func:`latency_class`): the profile's curve for
that class where it has one. Only the round-trip share of its time stretches: the share it streams at its own
solo draw (that draw as a fraction of the ceiling) is bandwidth's, already shared above. A GEMM kernel of light
blocks (cuBLAS's GEMV / dot and reduction kernels, SIMT GEMMs: a few rows, no tensor-core tile holding an SM)
waits on memory as well. A packed kernel slows by the larger of its packing and its memory latency, not by both:
the blocks packed onto one SM wait on their round trips side by side, so longer round trips cost it only where
they outlast the time its SM takes to issue the packed blocks' work (the placement probe's fp32 router GEMMs,
packed four blocks per SM beside streaming shared GEMMs, ran as slow as their packing says and no slower).

The engine places each kernel once, when it starts (:class:`~simulator.sharing.PlacingModel`). Because a
packed kernel keeps its cap after the kernels that crowded it end, two kernels overlapped can take longer than
the two in sequence, as the measured fp32 router GEMM beside a shared-expert GEMM does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.interference import capped_fill
from simulator.ir import Launch, Program
from simulator.profile import MemoryLatency, Profile
from simulator.sharing import Demand

_ON_CHIP_CLASSES = (("sort", "sort"), ("scan", "sort"), ("topk", "topk"), ("softmax", "softmax"))
ISSUE_CLASSES = ("xmma",)


def latency_class(kernel: str) -> str:
    """The memory-latency class of a latency-bound kernel, by its name: ``sort`` (sorting networks and scans,
    worked in shared memory), ``topk`` (selection), ``softmax`` (a row reduction), or ``gather``: the rest, whose
    time is mostly round trips to memory (gathers and scatters, copies, fills, elementwise kernels, GEMVs). The
    profile keeps a curve per class (measured in the layer traces: ``calibration.fit_latency_in_situ``)."""
    name = kernel.lower()
    return next((cls for tag, cls in _ON_CHIP_CLASSES if tag in name), "gather")


def issue_class(kernel: str) -> str | None:
    """The class whose measured ``issue_warps`` a light-block GEMM kernel takes, by its name: ``xmma`` (cuBLAS's
    xmma kernels, e.g. the split-K FFMA GEMM of small tiles and two-warp blocks that runs Kimi-K2's fp32 router at
    2-4 tokens), else None (the profile's ``issue_warps``, measured on CUTLASS's SIMT sgemm and cuBLAS's GEMV
    kernels)."""
    name = kernel.lower()
    return next((cls for cls in ISSUE_CLASSES if cls in name), None)


@dataclass(frozen=True, slots=True)
class Placed:
    """One kernel's placement: its spread and the share of the SMs its blocks occupy (fractions of the SMs),
    whether its blocks hold whole SMs, the cap it keeps for life when it was packed (else None), when it is
    slowed by the memory latency under load, its :func:`latency_class` (else None), and, when only some of its
    blocks were packed and the rest wait, how many times its solo time the packed ones take (``tail``: the kernel
    ends no sooner; else None), the share of the SMs they hold (``packed_sms``) and their share of its blocks
    (``packed_blocks``)."""

    spread: float
    touched: float
    full: bool
    packed_cap: float | None
    latency: str | None = None
    tail: float | None = None
    packed_sms: float = 0.0
    packed_blocks: float = 0.0


def packing_slowdown(blocks: int, warps: int, sms: int, sm_count: int, issue_warps: float,
                     per_sm: int | None = None) -> float:
    """How much slower a kernel of ``blocks`` blocks of ``warps`` warps runs on ``sms`` SMs than alone on
    ``sm_count``: its busiest SM holds ceil(blocks / SMs) of its blocks (at most ``per_sm``, the occupancy limit),
    and an SM runs ``issue_warps`` resident warps at full speed, more in proportion to their count."""

    def busiest(on: int) -> float:
        held = math.ceil(blocks / max(1, on))
        return max(1.0, (held if per_sm is None else min(held, per_sm)) * warps / issue_warps)

    return busiest(sms) / busiest(sm_count)


@dataclass(frozen=True, slots=True)
class PlacementSharing:
    """Block placement on ``sm_count`` SMs; ``bw_capacity`` / ``tc_capacity`` as in ``ResidencySharing``;
    ``memory_latency``: the latency-bound kernels' slowdown under load (None: not slowed); ``issue_warps``: the
    resident warps an SM runs at full speed (None: a packed kernel slows by its blocks' share of the SMs), and
    ``issue_warps_by_class``: (class, warps) pairs for the kernel classes measured apart (:func:`issue_class`)."""

    sm_count: int = 132
    bw_capacity: float = 1.0
    tc_capacity: float = 1.0
    memory_latency: MemoryLatency | None = None
    issue_warps: float | None = None
    issue_warps_by_class: tuple[tuple[str, float], ...] = ()

    def warps_at_full_speed(self, kernel: str) -> float | None:
        """The resident warps an SM runs at full speed for this kernel: its class's figure, else ``issue_warps``."""
        cls = issue_class(kernel)
        return next((warps for name, warps in self.issue_warps_by_class if name == cls), self.issue_warps)

    def rates(self, demands: Sequence[Demand]) -> list[float]:
        """Rates without placements (no geometry known): each kernel placed in turn, in start order."""
        placed: list[Placed] = []
        for demand in demands:
            placed.append(self.place(placed, demand, None))
        return self.placed_rates(demands, placed)

    def place(self, running: Sequence[Placed], demand: Demand, geometry: tuple[int, int, int | None] | None,
              kernel: str = "") -> Placed:
        """Where a kernel starting now lands beside ``running``; ``geometry``: (blocks, blocks per SM, warps per
        block or None) of a GEMM kernel; ``kernel``: its name (its :func:`latency_class`)."""
        if geometry is None:  # light, never packed; taken as latency-bound (its blocks mostly wait on memory),
            # unless it demands nothing (a traced kernel whose duration already holds its contention): rate 1
            # (what it touches is settled among the running kernels whenever rates are solved)
            spread = min(1.0, max(demand[0], 0.0))
            return Placed(spread, spread, False, None, latency_class(kernel) if any(demand) else None)
        blocks, per_sm, warps = geometry
        spread, full = min(blocks, self.sm_count) / self.sm_count, per_sm == 1
        latency = None if full else latency_class(kernel)  # a GEMV's light blocks wait on memory too
        capacity = blocks / (per_sm * self.sm_count)  # SMs its blocks need when packed
        room = self._room([now for now, _ in self._settle(running)], full)
        if spread <= room + 1e-12:
            return Placed(spread, spread, full, None, latency)
        issue = self.warps_at_full_speed(kernel)
        if not full and room > 0 and capacity <= room + 1e-12:
            return Placed(spread, room, full, self._packed_cap(blocks, per_sm, warps, spread, room, issue), latency)
        sms = math.floor(room * self.sm_count + 1e-9)
        if full or sms < 1 or issue is None or warps is None:
            return Placed(spread, room, full, None, latency)
        # the blocks that fit are packed onto the free SMs for life (as many per SM as occupancy allows); the
        # rest wait: the kernel ends when both are done
        tail = packing_slowdown(blocks, warps, sms, self.sm_count, issue, per_sm)
        return Placed(spread, room, full, None, latency, tail, sms / self.sm_count, min(1.0, sms * per_sm / blocks))

    @staticmethod
    def packed_remainder(placed: Placed, demand: Demand) -> tuple[Placed, Demand]:
        """What a kernel with a ``tail`` holds once its waiting blocks are done and only its packed ones run on:
        their SMs (packed: no cap to re-solve, no waiting blocks), drawing the bandwidth and tensor rate of their
        share of its work spread over the ``tail`` times its solo time they take."""
        draw = placed.packed_blocks / (placed.tail or 1.0)
        return (Placed(placed.packed_sms, placed.packed_sms, False, 1.0),
                (placed.packed_sms, demand[1] * draw, demand[2] * draw))

    def _packed_cap(self, blocks: int, per_sm: int, warps: int | None, spread: float, room: float,
                    issue: float | None) -> float:
        """The rate a kernel packed onto ``room`` of the SMs keeps for life: 1 / :func:`packing_slowdown` with
        ``issue`` warps at full speed, or the blocks' share of the SMs where the warps or ``issue`` are unknown."""
        if issue is None or warps is None:
            return room / spread
        sms = math.floor(room * self.sm_count + 1e-9)
        return 1.0 / packing_slowdown(blocks, warps, sms, self.sm_count, issue, per_sm)

    def placed_rates(self, demands: Sequence[Demand], placements: Sequence[Placed]) -> list[float]:
        """Rates in start order: SM caps from the placements (packed kernels keep theirs; the others get what
        the kernels before them leave); then, under those caps, the SMs no full-SM block holds shared by the
        light kernels that are not packed, bandwidth and tensor rate shared by all; then the latency-bound
        kernels slowed by the HBM the others draw (packed ones only past their packing)."""
        settled = self._settle(placements)
        caps = [cap for _, cap in settled]
        if len(demands) < 2:
            return caps
        bws = [d[1] for d in demands]
        offered = 1.0 + (self.bw_capacity - 1.0) * min(1.0, sum(bws) - max(bws))
        # light blocks that are not packed turn over: they share the SMs no full-SM block holds, max-min fairly
        shared = [(0.0 if now.full or now.packed_cap is not None else now.spread, d[1], d[2])
                  for (now, _), d in zip(settled, demands, strict=True)]
        room = self._room([now for now, _ in settled if now.full], False)
        rates = capped_fill(shared, caps, (room, offered, self.tc_capacity), first=0)
        if self.memory_latency is None:
            return rates
        # latency-bound kernels wait longer on memory the more HBM the others draw (the measured curve)
        drawn = sum(d[1] * r for d, r in zip(demands, rates, strict=True))
        curve = self.memory_latency
        # (a packed kernel: by the larger of its packing and its latency; its rate holds the packing already)
        return [r / max(1.0, _latency_factor(curve.slowdown(min(1.0, drawn - d[1] * r), now.latency), d[1])
                        * (now.packed_cap or 1.0)) if now.latency
                else r for r, d, (now, _) in zip(rates, demands, settled, strict=True)]

    def _settle(self, placements: Sequence[Placed]) -> list[tuple[Placed, float]]:
        """Each kernel's placement now and its SM cap, in start order: a packed kernel keeps its SMs and cap; the
        others hold what the kernels before them leave (their waiting blocks take SMs as they free up)."""
        out: list[tuple[Placed, float]] = []
        for p in placements:
            if p.packed_cap is not None:
                out.append((p, p.packed_cap))
                continue
            room = self._room([now for now, _ in out], p.full)
            cap = 1.0 if p.spread <= room + 1e-12 else room / p.spread if p.spread else 1.0
            out.append((Placed(p.spread, min(p.spread, room), p.full, None, p.latency, p.tail), cap))
        return out

    @staticmethod
    def _room(running: Sequence[Placed], full: bool) -> float:
        """The share of the SMs a kernel's blocks may use: for full-SM blocks the SMs no block touches, for
        light blocks the SMs no full-SM block holds."""
        held = sum(p.touched for p in running if p.full or full)
        return max(0.0, 1.0 - held)


def _latency_factor(slowdown: float, own_bw: float) -> float:
    """How much longer a latency-bound kernel takes when its memory round trips take ``slowdown`` times longer: the
    share of its solo time it streams at its own draw (``own_bw`` of the ceiling) is bandwidth's, shared apart;
    the rest is waiting on round trips."""
    streaming = min(1.0, max(own_bw, 0.0))
    return streaming + (1.0 - streaming) * slowdown


def placement_for(profile: Profile) -> PlacementSharing:
    """Block placement on the profile's GPU (its SM count), with the bandwidth and tensor-rate capacities of the
    profile's co-run fit (1, i.e. ideal, where its form has none), its memory latency and issue warps (per kernel
    class where measured)."""
    params = profile.interference.params
    return PlacementSharing(sm_count=profile.hardware.sm_count, bw_capacity=params.get("bw_capacity", 1.0),
                            tc_capacity=params.get("tc_capacity", 1.0), memory_latency=profile.memory_latency,
                            issue_warps=profile.issue_warps.value if profile.issue_warps is not None else None,
                            issue_warps_by_class=tuple(sorted((cls, fig.value) for cls, fig
                                                              in profile.issue_warps_by_kernel.items())))


GEMM_FAMILIES = ("gemm", "gemm_fp32", "grouped_gemm")


def sharing_for(profile: Profile, program: Program) -> Any:
    """How the shape path shares the device for ``program``: block placement (:func:`placement_for`) where the
    profile recorded the launch of every GEMM the program runs (``Profile.launch_geometry``: the kernel and its
    geometry, which the shapes alone do not say), else the profile's own form (``Profile.sharing_model``)."""
    gemms = [op for op in program.ops if isinstance(op, Launch) and op.family in GEMM_FAMILIES]
    if profile.launch_geometry is not None and gemms and all(op.blocks is not None for op in gemms):
        return placement_for(profile)
    return profile.sharing_model()
