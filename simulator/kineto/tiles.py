"""The last round of a persistent GEMM kernel: how many of its CTAs still run once the others have retired.

cuBLAS's nvjet GEMM kernels on sm_90 that have more output tiles than the GPU has SMs launch one CTA per SM (a
grid of exactly the SM count, one full-SM block each) and hand every CTA tiles in turn. With ``tiles`` output
tiles on ``ctas`` CTAs, ``tiles mod ctas`` CTAs work ``q + 1`` tiles and the rest ``q`` (``q = tiles // ctas``).
Tiles of one GEMM take about equal time, so the CTAs with one tile fewer retire once the kernel has done
``q / (q + 1)`` of its work, and their SMs are free for other kernels for its last ``1 / (q + 1)``: another
stream's kernels start there, beside the GEMM's last round, instead of waiting for its end.

Seen in the layer traces: Qwen2-57B's shared gate_up GEMM at one token (``nvjet_sm90_tst_192x8``, 214 tiles on
132 CTAs) lets the routing chain's first kernel start at half its time (H100,
``calibration/measurements/h100/2026-12-05/layer_traces_small``); at 1024 tokens (``320x128``, 1024 tiles) the
router starts at seven eighths of it, and beside the shared down GEMM (``112x128``, 256 tiles) the sort kernels
start at half (H200, ``calibration/measurements/h200/2026-12-02/kernels_real6``).

The output tile is in the kernel's name, ``nvjet_sm90_tst_{a}x{b}_...``: ``a`` rows of the weight (torch's N,
cuBLAS's m, the GEMM being computed transposed) by ``b`` tokens (torch's M). M and N come from the launching
operator's input shapes, so only traces recorded with shapes give them. Split-K kernels (``splitK`` in the
name) are left alone: how many ways they split K is not in the trace.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

_NVJET_TILE = re.compile(r"^nvjet_sm\d+_\w*?_(\d+)x(\d+)_")


class Tail(NamedTuple):
    """A persistent kernel's last round: ``blocks`` CTAs still running for the last ``share`` of its time."""

    blocks: int
    share: float


def output_tile(kernel: str) -> tuple[int, int] | None:
    """(rows of N, rows of M) of one output tile, from an nvjet kernel's name; None for other kernels and split-K."""
    if "splitk" in kernel.lower():
        return None
    found = _NVJET_TILE.match(kernel)
    return (int(found.group(1)), int(found.group(2))) if found else None


def last_round(kernel: str, ctas: int, sm_count: int, m: int | None, n: int | None) -> Tail | None:
    """The last round of a GEMM kernel of ``ctas`` CTAs computing an ``m`` × ``n`` output on ``sm_count`` SMs,
    where it is persistent (one CTA per SM), its tile is known and its tiles do not divide evenly; else None."""
    tile = output_tile(kernel)
    if tile is None or ctas != sm_count or not m or not n or m <= 0 or n <= 0:
        return None
    tiles = math.ceil(n / tile[0]) * math.ceil(m / tile[1])
    rounds, left = divmod(tiles, ctas)
    if rounds < 1 or left == 0:
        return None
    return Tail(left, 1.0 / (rounds + 1))
