"""Kernels of a torch profiler (Kineto) Chrome trace, attributed to the ``record_function`` labels whose
host range issued them (pure: works on the exported JSON dict)."""

from __future__ import annotations

import json
import os
import tempfile
from bisect import bisect_right
from typing import Any

RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime")
KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # copy_ of a contiguous tensor is a memcpy
NAME_CHARS = 120


def _range_index(annotations: list[dict[str, Any]]) -> tuple[list[float], list[dict[str, Any]]]:
    ranges = sorted(annotations, key=lambda e: e["ts"])
    return [r["ts"] for r in ranges], ranges


def kernels_by_label(trace: dict[str, Any], prefix: str) -> dict[str, list[dict[str, Any]]]:
    """``{label: [kernel, ...]}`` for every user annotation whose name starts with ``prefix``; a kernel is
    ``{"name", "ts", "dur", "grid", "block", "registers", "shared_memory", "stream"}`` (µs; registers per thread
    and bytes of shared memory per block, as Kineto gives them, else None), ordered by start. A kernel belongs to the
    label whose host range holds the runtime call with the kernel's correlation id (same thread)."""
    events = trace.get("traceEvents", trace if isinstance(trace, list) else [])
    notes = [e for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix)
             and "dur" in e]
    by_tid: dict[Any, tuple[list[float], list[dict[str, Any]]]] = {}
    for tid in {e.get("tid") for e in notes}:
        by_tid[tid] = _range_index([e for e in notes if e.get("tid") == tid])
    anywhere = _range_index(notes)  # where runtime calls carry another thread id than the annotations
    label_of: dict[Any, str] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") not in RUNTIME_CATS or corr is None:
            continue
        starts, ranges = by_tid.get(e.get("tid"), anywhere)
        i = bisect_right(starts, e["ts"]) - 1
        # innermost enclosing range: walk back over earlier starts while they still contain the call
        while i >= 0:
            r = ranges[i]
            if r["ts"] <= e["ts"] <= r["ts"] + r["dur"]:
                label_of[corr] = r["name"]
                break
            i -= 1
    out: dict[str, list[dict[str, Any]]] = {e["name"]: [] for e in notes}
    for e in events:
        if e.get("cat") not in KERNEL_CATS:
            continue
        args = e.get("args") or {}
        label = label_of.get(args.get("correlation"))
        if label is None:
            continue
        out[label].append({"name": e.get("name"), "ts": float(e["ts"]), "dur": float(e.get("dur", 0.0)),
                           "grid": args.get("grid"), "block": args.get("block"),
                           "registers": args.get("registers per thread"), "shared_memory": args.get("shared memory"),
                           "stream": args.get("stream")})
    for ks in out.values():
        ks.sort(key=lambda k: k["ts"])
    return out


def summarize_kernels(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-call kernel facts for a solo record: count, names (cut to NAME_CHARS), Σ durations, and the longest
    kernel's grid, block, registers per thread and shared memory per block (its occupancy inputs; None for
    memcpy/memset or where the trace lacks them)."""
    if not kernels:
        return {"kernels": 0}
    longest = max(kernels, key=lambda k: k["dur"])
    return {"kernels": len(kernels), "kernel_names": [str(k["name"])[:NAME_CHARS] for k in kernels],
            "kernel_us": sum(k["dur"] for k in kernels), "grid": longest["grid"], "block": longest["block"],
            "registers": longest.get("registers"), "shared_memory": longest.get("shared_memory")}


def exported_trace(prof: Any) -> dict[str, Any]:
    """The Chrome trace of a finished ``torch.profiler`` session, as a dict (through a temporary file, the
    only export torch offers)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as fh:
            return json.load(fh)
    finally:
        os.unlink(path)
