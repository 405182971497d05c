"""Host API costs in eager mode as torch issues them, graph-replay host cost, and device-side gaps."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from calibration.microbench.stats import gaps
from calibration.microbench.traces import exported_trace, kernels_by_label

BUSY_CYCLES = 40_000_000  # ~20 ms of torch.cuda._sleep at ~2 GHz, queued first so the host never waits
CHAIN = 200

HOW = {
    "launch_us": "host wall time per call of t.add_(1.0) on a 256-element tensor, 200 calls after a ~20 ms "
                 "sleep kernel queued on the same stream (median of 5 batches)",
    "launch_by_op_us": "the same for other ops: mm [1,64]x[64,64] (cuBLAS), topk [1,256] k=8, silu [1,2048]",
    "record_us": "Event().record() on the current stream, same method",
    "wait_us": "other_stream.wait_event(ev), same method",
    "set_stream_us": "torch.cuda.set_stream(s), alternating two streams, same method",
    "stream_ctx_us": "'with torch.cuda.stream(s): pass' enter+exit, same method",
    "fork_join_us": "one vLLM-style event pair with one tiny kernel on the aux stream: record, aux.wait_event, "
                    "with stream(aux): add_, record on aux, main.wait_event (includes one launch)",
    "sync_us": "torch.cuda.synchronize() on an idle device, median of 5 batches of 200",
    "replay_us": "host wall time per CUDAGraph.replay() of a one-kernel graph, 100 replays behind a sleep kernel",
    "replay_20_us": "the same for a graph of 20 kernels",
    "queue_depth": "launches of a tiny kernel accepted behind a long sleep kernel before one call blocked >1 ms",
    "kernel_gap_us": "device gap between dependent tiny kernels launched eagerly with the host ahead: "
                     "(span - sum of kernel durations) / (count - 1) from a torch.profiler trace of 200 add_",
    "node_gap_us": "the same inside one replay of a captured graph of 200 add_",
    "eager_period_us": "event-timed span of the 200 eager add_ / 200 (kernel + gap, no profiler)",
    "graph_period_us": "event-timed replay of the 200-node graph / 200 (kernel + gap + launch share, no profiler)",
}


def _host_per_call(torch: Any, fn: Callable[[], Any], n: int = 200, batches: int = 5,
                   busy: bool = True) -> tuple[float, bool]:
    """Median over batches of host µs per ``fn()``; False if the GPU ran dry before a batch ended."""
    per: list[float] = []
    held = True
    for _ in range(batches + 1):
        mark = torch.cuda.Event()
        if busy:
            torch.cuda._sleep(BUSY_CYCLES)
            mark.record()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        if busy:
            held = held and not mark.query()
        torch.cuda.synchronize()
        per.append((t1 - t0) / n * 1e6)
    return float(np.median(per[1:])), held


def _queue_depth(torch: Any, t: Any, limit: int = 4096) -> int | None:
    torch.cuda._sleep(10 * BUSY_CYCLES)
    depth = None
    for i in range(limit):
        t0 = time.perf_counter()
        t.add_(1.0)
        if time.perf_counter() - t0 > 1e-3:
            depth = i
            break
    torch.cuda.synchronize()
    return depth


def _profiled_gaps(torch: Any, t: Any, graph: Any) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile, record_function

    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(BUSY_CYCLES)
        with record_function("mb_gap:eager"):
            for _ in range(CHAIN):
                t.add_(1.0)
        torch.cuda.synchronize()
        with record_function("mb_gap:graph"):
            graph.replay()
        torch.cuda.synchronize()
    trace = exported_trace(prof)
    ks = kernels_by_label(trace, "mb_gap:")
    return {label.split(":")[1]: gaps([(k["ts"], k["dur"]) for k in ks.get(label, [])])
            for label in ("mb_gap:eager", "mb_gap:graph")}


def run(torch: Any, dev: Any, notes: list[str]) -> dict[str, Any]:
    """All host figures (µs) plus how each was measured."""
    t = torch.randn(256, device=dev)
    x, w, o = (torch.randn(1, 64, device=dev, dtype=torch.bfloat16),
               torch.randn(64, 64, device=dev, dtype=torch.bfloat16),
               torch.empty(1, 64, device=dev, dtype=torch.bfloat16))
    logits, act = torch.randn(1, 256, device=dev), torch.randn(1, 2048, device=dev, dtype=torch.bfloat16)
    main, aux = torch.cuda.current_stream(), torch.cuda.Stream()
    ev, ev2 = torch.cuda.Event(), torch.cuda.Event()
    t_aux = torch.randn(256, device=dev)
    ev.record()
    torch.cuda.synchronize()
    flip = [main, aux]

    def set_stream() -> None:
        flip.reverse()
        torch.cuda.set_stream(flip[0])

    def ctx() -> None:
        with torch.cuda.stream(aux):
            pass

    def fork_join() -> None:
        ev.record(main)
        aux.wait_event(ev)
        with torch.cuda.stream(aux):
            t_aux.add_(1.0)
        ev2.record(aux)
        main.wait_event(ev2)

    out: dict[str, Any] = {}
    dry: list[str] = []
    probes: dict[str, Callable[[], Any]] = {
        "launch_us": lambda: t.add_(1.0), "record_us": lambda: ev.record(), "wait_us": lambda: aux.wait_event(ev),
        "set_stream_us": set_stream, "stream_ctx_us": ctx, "fork_join_us": fork_join}
    for _ in range(20):
        for fn in probes.values():
            fn()
    torch.cuda.set_stream(main)
    for name, fn in probes.items():
        out[name], held = _host_per_call(torch, fn)
        if not held:
            dry.append(name)
    torch.cuda.set_stream(main)
    by_op = {"mm": lambda: torch.mm(x, w, out=o), "topk": lambda: torch.topk(logits, 8, sorted=False),
             "silu": lambda: torch.nn.functional.silu(act)}
    out["launch_by_op_us"] = {}
    for name, fn in by_op.items():
        fn()
        out["launch_by_op_us"][name], held = _host_per_call(torch, fn)
        if not held:
            dry.append(f"launch_by_op_us.{name}")
    out["sync_us"], _ = _host_per_call(torch, torch.cuda.synchronize, busy=False)
    graphs = {}
    for n in (1, 20, CHAIN):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                t.add_(1.0)
        graphs[n] = g
    for key, n in (("replay_us", 1), ("replay_20_us", 20)):
        out[key], held = _host_per_call(torch, graphs[n].replay, n=100)
        if not held:
            dry.append(key)
    out["queue_depth"] = _queue_depth(torch, t)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    periods = []
    for _ in range(5):
        torch.cuda._sleep(BUSY_CYCLES)
        a.record()
        for _ in range(CHAIN):
            t.add_(1.0)
        b.record()
        torch.cuda.synchronize()
        periods.append(a.elapsed_time(b) * 1e3 / CHAIN)
    out["eager_period_us"] = float(np.median(periods))
    periods = []
    for _ in range(5):
        a.record()
        graphs[CHAIN].replay()
        b.record()
        torch.cuda.synchronize()
        periods.append(a.elapsed_time(b) * 1e3 / CHAIN)
    out["graph_period_us"] = float(np.median(periods))
    try:
        prof = _profiled_gaps(torch, t, graphs[CHAIN])
    except (RuntimeError, OSError, ValueError, KeyError) as err:
        prof = {}
        notes.append(f"host: profiler gaps unavailable ({type(err).__name__}: {str(err)[:160]})")
    for key, label in (("kernel_gap_us", "eager"), ("node_gap_us", "graph")):
        g = prof.get(label)
        out[key] = g["mean_gap_us"] if g else None
        out[f"{key}_detail"] = g
        if prof and not g:
            notes.append(f"host: the profiler trace held no kernels for the {label} chain; {key} is null")
    if dry:
        notes.append(f"host: the GPU ran out of queued work before the host loop ended for {', '.join(dry)} "
                     "(figure may include host waits)")
    out["how"] = HOW
    return out
