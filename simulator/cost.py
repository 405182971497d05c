"""Solo kernel cost from shape: a measured table where the profile has one for the kernel's shape, else a
roofline times fitted per-family efficiencies, plus a fixed latency.

A ``KernelSpec`` may name the torch op it is (``op_key``): where no table applies, a profile family
``op:KEY`` (fitted to that op's device time in traces of the real layer) then replaces the generic family.
Table lookup: a ``KernelSpec`` may name a table (``table_key``) and its size ``x``; the solo time is then
the table's ``fixed_us`` + ``count`` × the table's time at ``x`` (+ the same for each further ``(x, count)``
of ``parts``), interpolated linearly in log(x)–log(µs) between measured points and extrapolated with the end
segment's log-log slope clamped to [0, 1] (time never falls with size and grows at most in proportion). Past
the last measured x, a GEMM's lookup is no faster than its flops at the profile's bf16 tensor ceiling
(``flops_per_x``: the flops of one unit of x, e.g. one row): the end slope of memory-bound points would
otherwise keep a many-row problem (a fused shared pseudo-expert of every token) at a few rows' time.
A profile whose tables were measured on another GPU of the same chip (``kernel_tables_from``: carried by
``calibration.carry --kernel-tables``) moves the share of a looked-up time that family's roofline spends streaming
there to its own family's rate here (:func:`transferred_time`); the rest stays as measured.
A grouped GEMM of a shape without a table of its own is costed by the profile's ``grouped_shard_law`` (per-kernel,
per-round and weight-streaming terms in µs, µs and GB/s, fitted to the calibration split's traced grouped kernels;
:func:`untabled_grouped_time`): a tensor-parallel shard as the table of the whole-expert shape it was cut from
scaled by the law's ratio of the two shapes, a shape of a model never measured by the law alone.
Otherwise:

``dur = latency + max(bytes / (B·bw_eff·f), flops' / (C·tc_eff·f))`` where B and C are the profile's HBM
and bf16 tensor ceilings, f = min(1, sm / fill_sat) the share of the peak rates a grid filling ``sm`` of the
SMs can reach, and flops' the flops with GEMM rows padded to the family's row tile. The ``Launch`` then
carries ``bw = bytes / dur / B`` and ``tc = flops' / dur / C``: what the kernel draws when running alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from simulator.ir import Launch
from simulator.profile import KernelFamily, LaunchGeometry, Profile, TableOrigin
from simulator.workloads.torch_calls import sibling_ops


@dataclass(frozen=True)
class KernelSpec:
    """A kernel described by its work rather than its time. ``sm``: share of the SMs its grid can fill
    (1 = the grid covers every SM); ``rows``: the GEMM M dimension (for tile padding), if any; ``flops_per_x``:
    a GEMM's flops per unit of its table's x (2·K·N per row), which bounds a lookup past the table's end;
    ``geometry``: the launch the library made for it on this GPU, where recorded (block placement reads it)."""

    name: str
    family: str
    flops: float = 0.0
    bytes: float = 0.0
    sm: float = 1.0
    rows: int | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    table: str | None = None
    x: float = 0.0
    count: float = 1.0
    parts: tuple[tuple[float, float], ...] = ()
    op_key: str | None = None
    flops_per_x: float = 0.0
    geometry: LaunchGeometry | None = None


def table_key(op: str, **dims: int) -> str:
    """Name of a measured table: the op and its fixed dims, e.g. ``mm K=7168 N=4096``."""
    return " ".join([op, *(f"{k}={int(v)}" for k, v in sorted(dims.items()))])


def table_time(points: Sequence[tuple[float, float]], x: float) -> float:
    """µs at ``x`` from sorted ``(x, µs)`` points (log-log; see the module docstring)."""
    if len(points) == 1 or x <= 0:
        return points[0][1]
    lx = math.log(x)
    logs = [(math.log(px), math.log(py)) for px, py in points]
    if lx <= logs[0][0]:
        (x0, y0), (x1, y1) = logs[0], logs[1]
    elif lx >= logs[-1][0]:
        (x0, y0), (x1, y1) = logs[-2], logs[-1]
    else:
        i = next(i for i in range(1, len(logs)) if lx <= logs[i][0])
        (x0, y0), (x1, y1) = logs[i - 1], logs[i]
        slope = (y1 - y0) / (x1 - x0) if x1 > x0 else 0.0
        return math.exp(y0 + slope * (lx - x0))
    slope = min(1.0, max(0.0, (y1 - y0) / (x1 - x0))) if x1 > x0 else 0.0
    anchor_x, anchor_y = (x0, y0) if lx <= x0 else (x1, y1)
    return math.exp(anchor_y + slope * (lx - anchor_x))


def table_lookup(points: Sequence[tuple[float, float]], x: float, flops_per_x: float,
                 tensor_flops_per_us: float) -> float:
    """µs at ``x`` from a measured table; past its last point at least ``x`` × ``flops_per_x`` at the tensor
    ceiling (the module docstring)."""
    t = table_time(points, x)
    if flops_per_x > 0 and x > points[-1][0]:
        t = max(t, x * flops_per_x / tensor_flops_per_us)
    return t


@dataclass(frozen=True)
class KernelCost:
    dur_us: float
    sm: float
    bw: float
    tc: float
    kernels: int = 1


def padded_flops(flops: float, rows: int | None, tile_m: int) -> float:
    """Tensor work actually issued when ``rows`` are padded up to whole ``tile_m`` tiles."""
    if not rows or tile_m <= 1:
        return flops
    return flops * math.ceil(rows / tile_m) * tile_m / rows


def roofline_time(fam: KernelFamily, flops: float, nbytes: float, sm: float, rows: int | None,
                  hbm_bytes_per_us: float, tensor_flops_per_us: float) -> float:
    """The family's streaming time: its bytes at the reachable HBM rate or its padded flops at the reachable
    tensor rate, whichever is longer (the solo time without the fixed latency)."""
    reach = min(1.0, max(sm, 1e-6) / fam.fill_sat)
    t_mem = nbytes / (hbm_bytes_per_us * fam.bw_eff * reach)
    t_cmp = padded_flops(flops, rows, fam.tile_m) / (tensor_flops_per_us * fam.tc_eff * reach)
    return max(t_mem, t_cmp)


def solo_time(fam: KernelFamily, flops: float, nbytes: float, sm: float, rows: int | None,
              hbm_bytes_per_us: float, tensor_flops_per_us: float) -> float:
    """The family's solo-time formula (shared by the cost model and the fitter)."""
    return fam.latency_us + roofline_time(fam, flops, nbytes, sm, rows, hbm_bytes_per_us, tensor_flops_per_us)


def transferred_time(measured_us: float, spec: KernelSpec, fam: KernelFamily, origin: TableOrigin,
                     hbm_bytes_per_us: float, tensor_flops_per_us: float) -> float:
    """A time measured on ``origin`` (a GPU of the same chip) moved here: the part of it its family's roofline
    spends streaming there (at most all of it) scales by the ratio of this family's roofline under these ceilings
    to that one; the rest (fixed latency, on-chip work) stays as measured."""
    there = roofline_time(origin.family(spec.family), spec.flops, spec.bytes, spec.sm, spec.rows,
                          origin.hbm_GBps * 1e3, origin.bf16_tflops * 1e6)
    if there <= 0:
        return measured_us
    here = roofline_time(fam, spec.flops, spec.bytes, spec.sm, spec.rows, hbm_bytes_per_us, tensor_flops_per_us)
    return measured_us + min(measured_us, there) * (here / there - 1.0)


def op_family(profile: Profile, op_key: str) -> KernelFamily | None:
    """The per-op family fitted to torch op ``op_key`` in the real layer's traces; else one fitted to another
    op of the builder that calls the same torch function, so runs the same kernels
    (``simulator.workloads.torch_calls``: DeepSeek-V3's in-group top-k takes the routers' fitted ``torch.topk``
    where its own was never traced); else None (the kernel class's family)."""
    families = profile.kernel_families
    own = families.get(f"op:{op_key}")
    if own is not None:
        return own
    return next((families[f"op:{key}"] for key in sibling_ops(op_key) if f"op:{key}" in families), None)


def kernel_cost(spec: KernelSpec, profile: Profile) -> KernelCost:
    """Solo duration and resource demand of a kernel under a profile."""
    table = profile.kernel_tables.get(spec.table) if spec.table else None
    op_fam = op_family(profile, spec.op_key) if spec.op_key and table is None else None
    fam = op_fam or profile.family(spec.family)
    hbm, tensor = profile.hbm_bytes_per_us, profile.tensor_flops_per_us
    by_law = untabled_grouped_time(spec, profile) if table is None else None
    if table is not None:
        dur = table.fixed_us + sum(n * table_lookup(table.points, x, spec.flops_per_x, tensor)
                                   for x, n in ((spec.x, spec.count), *spec.parts))
        if profile.kernel_tables_from is not None:
            dur = transferred_time(dur, spec, fam, profile.kernel_tables_from, hbm, tensor)
    elif by_law is not None:
        dur = by_law
    else:
        dur = solo_time(fam, spec.flops, spec.bytes, spec.sm, spec.rows, hbm, tensor)
    busy = max(dur, 1e-9)
    tc = padded_flops(spec.flops, spec.rows, fam.tile_m) / busy / tensor
    measured = table is not None or by_law is not None
    return KernelCost(dur_us=dur, sm=resident_share(fam, spec.sm, spec.rows), bw=min(1.0, spec.bytes / busy / hbm),
                      tc=min(1.0, tc), kernels=1 if measured else fam.kernels)


def table_dims(key: str) -> tuple[str, dict[str, int]]:
    """A table key's op and fixed dims (the inverse of :func:`table_key`)."""
    op, *dims = key.split()
    return op, {name: int(value) for name, value in (d.split("=") for d in dims)}


def whole_expert_table(key: str, tables: Iterable[str]) -> str | None:
    """The measured grouped-GEMM table a tensor-parallel shard's shape was cut from: the same K and a multiple of
    N (gate_up: the intermediate split), or the same N and a multiple of K (down); the smallest multiple first."""
    op, dims = table_dims(key)
    known = set(tables)
    for split in (2, 4, 8, 16, 32, 64):
        for whole in (table_key(op, K=dims["K"], N=dims["N"] * split), table_key(op, K=dims["K"] * split, N=dims["N"])):
            if whole in known:
                return whole
    return None


def costed_by_shard_law(spec: KernelSpec, profile: Profile) -> bool:
    """Whether the profile costs this launch by its grouped shard law: a grouped GEMM whose shape has no table."""
    return (profile.grouped_shard_law is not None and spec.family == "grouped_gemm" and bool(spec.table)
            and spec.table not in profile.kernel_tables)


def untabled_grouped_time(spec: KernelSpec, profile: Profile) -> float | None:
    """A grouped GEMM of a shape without its own table, by the profile's ``grouped_shard_law``: a tensor-parallel
    shard takes its whole-expert shape's measured time (same experts, rows and parts) × the law's ratio of the two
    shapes; a shape with no whole-expert table either (a model never measured) the law's own time. None where the
    profile has no law or the spec no table key."""
    law = profile.grouped_shard_law
    if law is None or not costed_by_shard_law(spec, profile):
        return None
    groups = ((spec.x, spec.count), *spec.parts)
    dims = table_dims(spec.table)[1]
    own = law.time_us(dims["K"], dims["N"], groups)
    whole = whole_expert_table(spec.table, profile.kernel_tables)
    if whole is None:
        return own
    whole_dims = table_dims(whole)[1]
    measured = kernel_cost(replace(spec, table=whole), profile).dur_us
    return measured * own / law.time_us(whole_dims["K"], whole_dims["N"], groups)


def resident_share(fam: KernelFamily, sm: float, rows: int | None) -> float:
    """Share of the SMs' resources a running kernel holds (its ``sm`` demand), per the family's ``resident``."""
    if fam.resident == "full":
        return 1.0
    share = min(1.0, max(sm, 0.0))
    if fam.resident == "rows" and rows:
        share *= min(1.0, rows / fam.tile_m)
    return share


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
        """The costed launch; its eager host cost is the profile's figure for the op's name, else for its family,
        where it has one."""
        c = self.cost(spec)
        figures = self.profile.host
        host = figures.launch_by_op_us.get(spec.name) or figures.launch_by_family_us.get(spec.family)
        geo = spec.geometry
        placed = {} if geo is None else {"blocks": geo.blocks, "blocks_per_sm": geo.blocks_per_sm,
                                         "warps_per_block": geo.warps_per_block, "library_kernel": geo.kernel}
        return Launch(kernel=spec.name, stream=stream, dur_us=c.dur_us, sm=c.sm, bw=c.bw, tc=c.tc, kernels=c.kernels,
                      reads=spec.reads, writes=spec.writes, family=spec.family, region=region,
                      host_us=host.value if host is not None else None, **placed)
