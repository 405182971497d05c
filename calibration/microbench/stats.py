"""Statistics of timing samples (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summarize(samples_us: Sequence[float]) -> dict[str, float | int]:
    """Median, 10th and 90th percentile (linear interpolation) and count of a list of µs samples."""
    if not samples_us:
        raise ValueError("no samples")
    arr = np.asarray(samples_us, dtype=float)
    p10, med, p90 = np.percentile(arr, [10, 50, 90])
    return {"median_us": float(med), "p10_us": float(p10), "p90_us": float(p90), "n": len(arr)}


def chain_per_call(t_short: Sequence[float], t_long: Sequence[float], n: int) -> list[float]:
    """Per-call µs from paired replays of an n-call and a 2n-call graph: (T(2n) − T(n)) / n, which cancels
    the graph launch cost and whatever one replay pays once."""
    if n < 1:
        raise ValueError("a chain needs at least one call")
    return [(b - a) / n for a, b in zip(t_short, t_long, strict=True)]


def chain_length(single_us: float, target_us: float = 1000.0, lo: int = 4, hi: int = 64) -> int:
    """Calls per timed graph so that one replay lasts about ``target_us``."""
    if single_us <= 0:
        return hi
    return int(max(lo, min(hi, round(target_us / single_us))))


def gaps(kernels: Sequence[tuple[float, float]]) -> dict[str, float | int] | None:
    """Device gaps of a dependent chain from (start_us, duration_us) of its kernels in issue order:
    mean = (span − Σ durations) / (count − 1), plus the median of the individual gaps."""
    if len(kernels) < 2:
        return None
    ks = sorted(kernels)
    span = ks[-1][0] + ks[-1][1] - ks[0][0]
    busy = sum(d for _, d in ks)
    each = [ks[i + 1][0] - (ks[i][0] + ks[i][1]) for i in range(len(ks) - 1)]
    return {"mean_gap_us": (span - busy) / (len(ks) - 1), "median_gap_us": float(np.median(each)),
            "median_kernel_us": float(np.median([d for _, d in ks])), "count": len(ks)}
