"""Timing shared by the distributed benches: every rank runs the same number of steps (so collectives pair
up), each rank times its own steps (CUDA events on GPU, perf_counter on CPU), rank 0 gathers the samples."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
import torch.distributed as dist

from kernels_real.distributed.parallel import Dist
from kernels_real.timing import time_steps


def agreed_max(d: Dist, value: float) -> float:
    """The largest ``value`` over all ranks (every rank gets it)."""
    if d.world == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=d.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def measure(d: Dist, step: Callable[[int], None], target_s: float, min_n: int, max_n: int) -> list[float]:
    """Warm up, agree on a step count from the slowest rank's estimate, time; this rank's µs per step."""
    for i in range(3):
        step(i)
    est_us = agreed_max(d, statistics.median(time_steps(step, 3, d.on_gpu)))
    n = max(min_n, min(max_n, int(target_s * 1e6 / max(est_us, 1.0))))
    if d.world > 1:
        dist.barrier()
    return time_steps(step, n, d.on_gpu)


def gather(d: Dist, obj: object) -> list[object] | None:
    """Every rank's ``obj``, on rank 0 (None elsewhere)."""
    if d.world == 1:
        return [obj]
    out: list[object] = [None] * d.world
    dist.all_gather_object(out, obj)
    return out if d.rank == 0 else None


def stats(samples_us: list[float]) -> dict[str, float]:
    """Median, min, p90 and mean of one rank's samples (µs)."""
    ordered = sorted(samples_us)
    return {"median_us": statistics.median(ordered), "min_us": ordered[0],
            "p90_us": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], "mean_us": statistics.fmean(ordered)}


def rank_summary(rank_samples: list[list[float]]) -> dict[str, object]:
    """The slowest rank's statistics (a collective or a layer step ends when its slowest rank does), each
    rank's median, and the sample count."""
    per_rank = [stats(s) for s in rank_samples]
    slowest = max(per_rank, key=lambda s: s["median_us"])
    return {**slowest, "rank_medians_us": [s["median_us"] for s in per_rank],
            "replays": min(len(s) for s in rank_samples), "ranks": len(rank_samples)}
