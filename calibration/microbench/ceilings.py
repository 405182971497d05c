"""Ceilings measured on the device: device-to-device copy bandwidth and the bf16 matrix-product rate."""

from __future__ import annotations

from typing import Any

import numpy as np

COPY_BYTES = 1 << 30
MM = 8192


def _event_times(torch: Any, fn: Any, warm: int, reps: int) -> list[float]:
    for _ in range(warm):
        fn()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 for a, b in evs]


def _copy_us(torch: Any, dev: Any, reps: int) -> float:
    src = torch.randn(COPY_BYTES // 2, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    return float(np.median(_event_times(torch, lambda: dst.copy_(src), 3, reps)))


def _mm_us(torch: Any, dev: Any, reps: int) -> float:
    a = torch.randn(MM, MM, dtype=torch.bfloat16, device=dev)
    b = torch.randn(MM, MM, dtype=torch.bfloat16, device=dev)
    o = torch.empty_like(a)
    return float(np.median(_event_times(torch, lambda: torch.mm(a, b, out=o), 3, reps)))


def run(torch: Any, dev: Any, quick: bool) -> dict[str, Any]:
    """Copy GB/s (bytes read + written) and bf16 TFLOP/s, medians of event-timed repeats on random data."""
    reps = 5 if quick else 10
    copy_us = _copy_us(torch, dev, reps)
    mm_us = _mm_us(torch, dev, reps)
    torch.cuda.empty_cache()
    return {
        "copy_GBps": 2 * COPY_BYTES / copy_us / 1e3,
        "bf16_tflops": 2 * MM**3 / mm_us / 1e6,
        "copy_us": copy_us,
        "mm_us": mm_us,
        "how": (f"copy: dst.copy_(src) of {COPY_BYTES >> 20} MiB bf16 random data, bytes read + written, median "
                f"of {reps} event-timed copies after 3 warm-ups; matmul: torch.mm of {MM}x{MM}x{MM} bf16 random "
                f"data, 2*M*N*K flops, median of {reps} event-timed products after 3 warm-ups"),
    }
