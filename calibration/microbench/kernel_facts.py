"""One profiled eager call per solo shape: which kernels it launches, their launch geometry, occupancy inputs and
durations."""

from __future__ import annotations

import warnings
from typing import Any

from calibration.microbench.ops import build, weight_key
from calibration.microbench.progress import progress
from calibration.microbench.traces import exported_trace, kernels_by_label, summarize_kernels

HOW = ("one eager call per solo shape (after one warm-up call) inside torch.profiler with "
       "record_function labels; kernels attributed through the runtime call's correlation id; grid, block, "
       "registers per thread and shared memory per block of the longest kernel; kernel_us = sum of its "
       "kernels' durations (profiler clock, L2 not rotated)")


def run(torch: Any, records: list[dict[str, Any]], dev: Any, budget: Any, notes: list[str]) -> None:
    """Add ``kernels``, ``kernel_names``, ``kernel_us``, ``grid``, ``block``, ``registers``, ``shared_memory`` to
    solo ``records`` in place."""
    from torch.profiler import ProfilerActivity, profile, record_function

    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")

    specs = [{"family": r["family"], **r["shape"]} for r in records]
    cache: dict[Any, Any] = {}
    key = None
    done = 0
    bar = progress(total=len(specs), desc="kernels")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, spec in enumerate(specs):
            if budget.expired():
                budget.skip("kernel-facts", len(specs) - i)
                break
            if weight_key(spec) != key:
                cache.clear()
                key = weight_key(spec)
            try:
                call = build(torch, spec, dev, 0, cache)[0]
                call()
                torch.cuda.synchronize()
                with record_function(f"mb_solo:{i}"):
                    call()
                torch.cuda.synchronize()
            except (RuntimeError, NotImplementedError, TypeError):
                torch.cuda.synchronize()
            done = i + 1
            bar.update(1)
    bar.close()
    cache.clear()
    torch.cuda.empty_cache()
    trace = exported_trace(prof)
    found = kernels_by_label(trace, "mb_solo:")
    hits = 0
    for i in range(done):
        ks = found.get(f"mb_solo:{i}", [])
        hits += bool(ks)
        records[i].update(summarize_kernels(ks))
    if done and not hits:
        notes.append("kernel facts: the profiler trace attributed no kernels; grid/block are null")
