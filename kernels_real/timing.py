"""Per-call timing of back-to-back calls: CUDA events on a GPU (HIP builds provide the same API), the host
clock on CPU."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def time_steps(step: Callable[[int], None], n: int, gpu: bool) -> list[float]:
    """µs of each of ``n`` back-to-back calls of ``step`` (called with its index)."""
    if not gpu:
        out = []
        for i in range(n):
            t0 = time.perf_counter()
            step(i)
            out.append((time.perf_counter() - t0) * 1e6)
        return out
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        starts[i].record()
        step(i)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True)]
