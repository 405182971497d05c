"""Per-kernel resource demand from what the trace says about it: SM share from the launch geometry and
occupancy limits, HBM and tensor share from the bytes/flops its operator's input shapes imply.

``sm`` = grid blocks / (resident blocks per SM × SMs), capped at 1, where the resident limit follows from the
block size, registers and shared memory against ``deviceProperties`` (the CUDA occupancy rules); without
those fields, Kineto's occupancy estimate (threads resident / thread slots) stands in. Where shapes give no
bytes, a kernel is taken to run at its profile family's efficiency on the resource that family is bound by
(GEMMs: tensor rate; the rest: HBM); copies without a byte count are taken as HBM-bound.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from simulator.kineto.events import CpuOp, DeviceProps, GpuOp
from simulator.profile import Profile

MAX_BLOCKS_PER_SM = 32  # CUDA compute capability 5.0-9.0 (and AMD CUs allow as many wavefront groups)
REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256
SMEM_RESERVED_PER_BLOCK = 1024  # bytes the runtime keeps per resident block (sm_80+)

_DTYPE_BYTES = {"float": 4, "double": 8, "c10::half": 2, "c10::bfloat16": 2, "half": 2, "bfloat16": 2,
                "long int": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
                "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "c10::float8_e4m3fnuz": 1,
                "c10::float8_e5m2fnuz": 1}
_GEMM_OPS = ("mm", "addmm", "bmm", "matmul", "linear", "baddbmm", "_scaled_mm")
_GROUPED_OPS = ("_grouped_mm", "grouped_mm", "_scaled_grouped_mm")
_GEMV_KERNELS = ("dot_kernel", "gemv")  # cuBLAS's matrix-vector kernels (a router GEMM at one token)
# serving engines' routed-expert GEMMs, launched outside aten: vLLM / SGLang's Triton ``fused_moe_kernel``, AMD
# aiter's CK ``ck_moe`` / ``fmoe`` kernels
_MOE_GEMM_KERNELS = ("fused_moe", "moe_gemm", "ck_moe", "fmoe")


class Demand(NamedTuple):
    sm: float
    bw: float
    tc: float
    family: str
    nbytes: float | None
    flops: float | None
    blocks: int | None = None  # the grid's thread blocks
    blocks_per_sm: int | None = None  # how many of them one SM holds at once (occupancy rules)
    warps_per_block: int | None = None  # warps in one of them


def resident_blocks(op: GpuOp, dev: DeviceProps | None) -> int | None:
    """Blocks of this kernel one SM can hold at once (None when the trace lacks the fields)."""
    if dev is None or op.block is None or dev.max_threads_per_sm <= 0:
        return None
    threads = math.prod(op.block)
    if threads <= 0:
        return None
    warp = dev.warp_size or 32
    warps = -(-threads // warp)
    limit = min(MAX_BLOCKS_PER_SM, dev.max_threads_per_sm // (warps * warp))
    if op.regs and dev.regs_per_sm > 0:
        per_warp = -(-op.regs * warp // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
        limit = min(limit, dev.regs_per_sm // (per_warp * warps))
    if op.smem and dev.smem_per_sm > 0:
        limit = min(limit, dev.smem_per_sm // (op.smem + SMEM_RESERVED_PER_BLOCK))
    return max(limit, 1)


def sm_fraction(op: GpuOp, dev: DeviceProps | None, sm_count: int) -> float | None:
    """Share of the device's SM slots the kernel's grid occupies in its first wave."""
    if op.grid is None:
        return None
    blocks = math.prod(op.grid)
    resident = resident_blocks(op, dev)
    if resident is not None and sm_count > 0:
        return min(1.0, blocks / (resident * sm_count))
    if op.occupancy_pct is not None and op.occupancy_pct > 0:
        return min(1.0, op.occupancy_pct / 100.0)
    return None


def op_family(op: GpuOp, cpu: CpuOp | None) -> str:
    """Kernel family from the launching operator (aten semantics), else from library naming conventions."""
    if op.kind != "kernel":
        return op.kind
    if cpu is not None:
        base = cpu.name.split("::")[-1].lower()
        if base in _GROUPED_OPS:
            return "grouped_gemm"
        if base in _GEMM_OPS:
            return "gemm"
        if "topk" in base:
            return "topk"
        if base in ("sort", "argsort", "index_select", "gather", "scatter", "scatter_add", "index_add",
                    "index", "index_put", "scatter_add_"):
            return "permute"
    return name_family(op.name)


def name_family(kernel: str) -> str:
    """Kernel family from the kernel's name alone (library naming conventions)."""
    name = kernel.lower()
    if any(tag in name for tag in _MOE_GEMM_KERNELS):
        return "grouped_gemm"
    if any(tag in name for tag in ("gemm", "matmul", "xmma", "cutlass", "wgmma", "nvjet", "hgemm")):
        return "grouped_gemm" if "group" in name else "gemm"
    if "topk" in name:
        return "topk"
    return "elementwise"


def is_gemv(kernel: str) -> bool:
    """Whether a kernel is one of cuBLAS's matrix-vector kernels (a router GEMM at one token)."""
    return any(tag in kernel for tag in _GEMV_KERNELS)


def shape_cost(cpu: CpuOp) -> tuple[float | None, float | None]:
    """(bytes, flops) one call of ``cpu`` moves/does by its input shapes; None where unknown."""
    sizes = []
    for i, dims in enumerate(cpu.dims):
        if dims is None or not dims:
            continue
        dtype = cpu.types[i] if i < len(cpu.types) else ""
        width = _DTYPE_BYTES.get(dtype.lower())
        if width is None:
            continue
        sizes.append((dims, width))
    if not sizes:
        return None, None
    nbytes = float(sum(math.prod(d) * w for d, w in sizes))
    flops = None
    out_elems = None
    base = cpu.name.split("::")[-1].lower()
    shapes = [d for d, _ in sizes]
    width = sizes[0][1]
    if base in _GROUPED_OPS and len(shapes) >= 2 and len(shapes[0]) == 2 and len(shapes[1]) == 3:
        return _grouped_cost(shapes[0], shapes[1], sizes[0][1], sizes[1][1])
    if base in ("mm", "matmul", "linear", "addmm", "bmm", "baddbmm"):
        a, b = (shapes[-2], shapes[-1]) if base in ("addmm", "baddbmm") else (shapes[0], shapes[1])
        if len(a) >= 2 and len(b) >= 2:
            m = math.prod(a[:-1])
            k = a[-1]
            n = b[-2] if base == "linear" else b[-1]
            flops = 2.0 * m * k * n
            out_elems = m * n
    elif base.endswith("_") or base in ("copy_", "fill_", "zero_"):
        out_elems = 0  # in place: the output is an input already counted
    else:
        out_elems = math.prod(shapes[0])
    if out_elems:
        nbytes += out_elems * width
    return nbytes, flops


def _grouped_cost(a: tuple[int, ...], b: tuple[int, ...], a_width: int, b_width: int) -> tuple[float, float]:
    """(bytes, flops) of a grouped GEMM ``a [M, K] x b [E, K, N]``: its M rows fall in at most min(E, M)
    groups, so at most that many of the E stacked weight matrices are read."""
    m, k = a
    e, _, n = b
    touched = min(e, m)
    nbytes = m * k * a_width + touched * k * n * b_width + m * n * a_width
    return float(nbytes), 2.0 * m * k * n


def kernel_demand(op: GpuOp, cpu: CpuOp | None, cpu_busy_us: float, dev: DeviceProps | None,
                  profile: Profile) -> Demand:
    """The (sm, bw, tc) fractions the engine shares. The bytes/flops of the launching operator's shapes are
    spread over the GPU time of all kernels it launched (``cpu_busy_us``); a rate above the ceiling means the
    shapes overstate what is touched (e.g. a grouped GEMM reading a few experts of a stacked weight), and
    the family default stands instead."""
    sm_count = (dev.num_sms if dev and dev.num_sms else profile.hardware.sm_count)
    family = op_family(op, cpu)
    sm = sm_fraction(op, dev, sm_count)
    fam = profile.kernel_families.get(family) or profile.kernel_families.get("default")
    gemm = family in ("gemm", "grouped_gemm")
    bw = tc = None
    nbytes = flops = None
    if op.kind != "kernel":
        bw = min(1.0, op.nbytes / max(op.dur, 1e-3) / profile.hbm_bytes_per_us) if op.nbytes else 1.0
    elif cpu is not None and cpu_busy_us > 0:
        nbytes, flops = shape_cost(cpu)
        bw = nbytes / cpu_busy_us / profile.hbm_bytes_per_us if nbytes is not None else None
        tc = flops / cpu_busy_us / profile.tensor_flops_per_us if flops is not None else None
        if (bw is not None and bw > 1.0) or (tc is not None and tc > 1.0):
            bw = tc = None
    if bw is None:  # no usable shapes: run at the family's efficiency on the resource it is bound by
        bw = 0.0 if gemm or fam is None else fam.bw_eff
    if tc is None:
        tc = fam.tc_eff if gemm and fam is not None and nbytes is None else 0.0
    if sm is None:
        sm = 1.0 if op.kind == "kernel" else 0.0
    # placement (simulator.placement) is tracked for GEMM kernels (cuBLAS's dot / GEMV kernels included): their
    # blocks keep an SM's issue slots busy, so blocks packed several per SM run slower once they fill them; the other
    # kernels' blocks wait on memory, and packing them costs little: their SM share alone stands for them
    blocks = math.prod(op.grid) if tracks_placement(op, family) and op.grid else None
    return Demand(_clip(sm), _clip(bw), _clip(tc), family, nbytes, flops, blocks or None,
                  resident_blocks(op, dev) if blocks else None, block_warps(op, dev) if blocks else None)


def tracks_placement(op: GpuOp, family: str) -> bool:
    """Whether block placement follows this kernel's launch geometry: GEMM kernels (of family ``gemm`` or
    ``grouped_gemm``, cuBLAS's dot / GEMV kernels included)."""
    return op.kind == "kernel" and (family in ("gemm", "grouped_gemm") or is_gemv(op.name))


def block_warps(op: GpuOp, dev: DeviceProps | None) -> int | None:
    """Warps in one of the kernel's thread blocks (None when the trace lacks the block size)."""
    if op.block is None or math.prod(op.block) <= 0:
        return None
    warp = (dev.warp_size if dev is not None else 0) or 32
    return -(-math.prod(op.block) // warp)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
