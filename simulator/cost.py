"""Solo kernel cost from shape: a roofline times fitted per-family efficiencies, plus a fixed latency.

``dur = latency + max(bytes / (B·bw_eff·f), flops' / (C·tc_eff·f))`` where B and C are the profile's HBM
and bf16 tensor ceilings, f = min(1, sm / fill_sat) the share of the peak rates a grid filling ``sm`` of the
SMs can reach, and flops' the flops with GEMM rows padded to the family's row tile. The ``Launch`` then
carries ``bw = bytes / dur / B`` and ``tc = flops' / dur / C``: what the kernel draws when running alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.ir import Launch
from simulator.profile import KernelFamily, Profile


@dataclass(frozen=True)
class KernelSpec:
    """A kernel described by its work rather than its time. ``sm``: share of the SMs its grid can fill
    (1 = the grid covers every SM); ``rows``: the GEMM M dimension (for tile padding), if any."""

    name: str
    family: str
    flops: float = 0.0
    bytes: float = 0.0
    sm: float = 1.0
    rows: int | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelCost:
    dur_us: float
    sm: float
    bw: float
    tc: float


def padded_flops(flops: float, rows: int | None, tile_m: int) -> float:
    """Tensor work actually issued when ``rows`` are padded up to whole ``tile_m`` tiles."""
    if not rows or tile_m <= 1:
        return flops
    return flops * math.ceil(rows / tile_m) * tile_m / rows


def solo_time(fam: KernelFamily, flops: float, nbytes: float, sm: float, rows: int | None,
              hbm_bytes_per_us: float, tensor_flops_per_us: float) -> float:
    """The family's solo-time formula (shared by the cost model and the fitter)."""
    reach = min(1.0, max(sm, 1e-6) / fam.fill_sat)
    t_mem = nbytes / (hbm_bytes_per_us * fam.bw_eff * reach)
    t_cmp = padded_flops(flops, rows, fam.tile_m) / (tensor_flops_per_us * fam.tc_eff * reach)
    return fam.latency_us + max(t_mem, t_cmp)


def kernel_cost(spec: KernelSpec, profile: Profile) -> KernelCost:
    """Solo duration and resource demand of a kernel under a profile."""
    fam = profile.family(spec.family)
    hbm, tensor = profile.hbm_bytes_per_us, profile.tensor_flops_per_us
    dur = solo_time(fam, spec.flops, spec.bytes, spec.sm, spec.rows, hbm, tensor)
    busy = max(dur, 1e-9)
    tc = padded_flops(spec.flops, spec.rows, fam.tile_m) / busy / tensor
    return KernelCost(dur_us=dur, sm=min(1.0, max(spec.sm, 0.0)), bw=min(1.0, spec.bytes / busy / hbm),
                      tc=min(1.0, tc))


def gemm_grid_share(rows: int, cols: int, fam: KernelFamily, sm_count: int, groups: int = 1,
                    depth: int = 0) -> float:
    """SM share of a (grouped) GEMM grid: ``groups`` problems of ``rows`` × ``cols`` in output tiles; a
    grid smaller than the device is split along K (``depth``) in ``fam.split_k_depth`` chunks."""
    if rows <= 0 or cols <= 0 or groups <= 0:
        return 0.0
    tiles = groups * math.ceil(rows / fam.tile_m) * math.ceil(cols / fam.tile_n)
    if fam.split_k_depth and depth > fam.split_k_depth and tiles < sm_count:
        tiles *= min(math.ceil(sm_count / tiles), depth // fam.split_k_depth)
    return min(1.0, tiles / sm_count)


def elementwise_grid_share(elements: float, fam: KernelFamily, sm_count: int) -> float:
    """SM share of an elementwise grid of ``elements`` (one block per ``elems_per_block``)."""
    return min(1.0, math.ceil(max(elements, 1) / fam.elems_per_block) / sm_count)


class CostModel:
    """Turns ``KernelSpec``s into ``Launch`` ops under one profile."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    def cost(self, spec: KernelSpec) -> KernelCost:
        return kernel_cost(spec, self.profile)

    def launch(self, spec: KernelSpec, stream: str, region: str | None = None) -> Launch:
        c = self.cost(spec)
        return Launch(kernel=spec.name, stream=stream, dur_us=c.dur_us, sm=c.sm, bw=c.bw, tc=c.tc,
                      reads=spec.reads, writes=spec.writes, family=spec.family, region=region)
