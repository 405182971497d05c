"""Solo kernel times: per-call time from CUDA/HIP graphs of back-to-back calls over rotated buffers."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibration.microbench.ops import ROW_PLACEMENTS, build, weight_key
from calibration.microbench.progress import progress
from calibration.microbench.records import solo_record
from calibration.microbench.stats import chain_length, chain_per_call, summarize
from calibration.microbench.timing import capture, replay_times

HOW = ("per-call time = (T(2N) - T(N)) / N from event-timed replays of two graphs holding N and 2N back-to-back "
       "calls on one stream, rotating buffer sets so consecutive calls touch >= 4x L2 (grouped GEMMs rotate "
       "the routing over one weight tensor, and since 2026-12-07 each routing's input rows over "
       f"{ROW_PLACEMENTS} addresses, N a multiple of {ROW_PLACEMENTS}: rotations counts both); N sized so a replay "
       "lasts ~1 ms (4..64); single_us = one-call graph replay (graph launch fixed cost + one call, buffers of "
       "rotation 0)")


def measure(torch: Any, spec: dict[str, Any], dev: Any, l2: int, cache: dict[Any, Any], reps: int) -> dict[str, Any]:
    """One solo record for ``spec``."""
    calls = build(torch, spec, dev, l2, cache)
    for c in calls:
        c()
    torch.cuda.synchronize()
    g1 = capture(torch, calls[:1])
    single = replay_times(torch, [g1], 3 + reps)[0][3:]
    n = chain_length(float(np.median(single)))
    if spec["op"] == "grouped_mm":  # every window of n calls takes each of a routing's row placements alike
        n = -(-n // ROW_PLACEMENTS) * ROW_PLACEMENTS
    short = capture(torch, [calls[i % len(calls)] for i in range(n)])
    long = capture(torch, [calls[i % len(calls)] for i in range(2 * n)])
    replay_times(torch, [short, long], 2)
    t_short, t_long = replay_times(torch, [short, long], reps)
    samples = chain_per_call(t_short, t_long, n)
    stats = summarize(samples)
    extra = {"single_us": float(np.median(single)), "graph_n": n, "rotations": len(calls),
             "samples_us": [round(s, 4) for s in samples]}
    del g1, short, long
    return solo_record(spec, stats, extra)


def run(torch: Any, specs: list[dict[str, Any]], dev: Any, l2: int, budget: Any, reps: int,
        notes: list[str]) -> list[dict[str, Any]]:
    """Measure ``specs`` in order until the budget's stage deadline; failures become notes."""
    out: list[dict[str, Any]] = []
    cache: dict[Any, Any] = {}
    key = None
    failed: dict[str, str] = {}
    bar = progress(total=len(specs), desc="solo")
    for i, spec in enumerate(specs):
        if budget.expired():
            budget.skip("solo", len(specs) - i)
            break
        if weight_key(spec) != key:
            cache.clear()
            key = weight_key(spec)
        try:
            out.append(measure(torch, spec, dev, l2, cache, reps))
        except (RuntimeError, NotImplementedError, TypeError) as err:
            failed.setdefault(spec["op"], f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
            torch.cuda.synchronize()
        bar.update(1)
    bar.close()
    cache.clear()
    torch.cuda.empty_cache()
    notes += [f"solo {op} failed (skipped its shapes): {msg}" for op, msg in failed.items()]
    return out
