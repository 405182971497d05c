"""Host time of eager layer calls, profiler-free: what an eager layer's host thread spends per torch op.

A sample (:func:`host_sample`) queues a sleep kernel first, so that no call waits for the device, then times
``calls`` plain layer calls with the host clock (the host-only layer time) and one more under :class:`OpClock`,
a ``TorchFunctionMode`` that stamps every torch function call the layer makes (Python API level: ``F.linear``,
``Tensor.index_select``, ``torch.sort``, … and the views and metadata reads that launch nothing): per call the
time inside it and the host time since the previous one returned (the layer's own Python, ``record_function``
ranges, stream and event calls). The clock adds its own cost per call: the plain calls give the true total.
Plain calls launched onto an idle device (a synchronize before each) give the host time with every launch
meeting an idle GPU; a host-bound eager burst's calls measured between the two (H100, 2026-12-05).
HIP-portable (``torch.cuda`` API only); ROCm was not run.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

PLAIN_CALLS = 3  # plain layer calls per sample, then one clocked call
SLEEP_CYCLES = 25_000_000  # ~12.6 ms at 1.98 GHz: longer than 4 calls of the slowest eager layer's host work


def op_name(func: Callable[..., Any]) -> str:
    """A torch function's name as the layer calls it: ``linear``, ``Tensor.index_select``, ``Tensor.shape``."""
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    if name.endswith(".__get__"):  # a property read (Tensor.shape, Tensor.dtype)
        owner = getattr(func, "__self__", None)
        name = f"Tensor.{getattr(owner, '__name__', 'property')}"
    for marker in ("_record_function_enter", "_record_function_exit"):
        if marker in name:
            return marker.removeprefix("_")
    for prefix in ("_VariableFunctionsClass.", "_TensorBase.", "TensorBase."):
        if name.startswith(prefix):
            return ("Tensor." if "TensorBase" in prefix else "") + name.removeprefix(prefix)
    return name


class OpClock(TorchFunctionMode):
    """Stamps every torch function call made under it: ``(name, start_ns, end_ns)`` in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, int]] = []

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        start = perf_counter_ns()
        out = func(*args, **(kwargs or {}))
        self.calls.append((op_name(func), start, perf_counter_ns()))
        return out


def clocked_call(call: Callable[[], None]) -> tuple[list[tuple[str, float, float]], float]:
    """One ``call()`` under :class:`OpClock`: per torch function ``(name, µs inside, µs of host time before it
    since the previous one returned)``, and the call's whole host time (µs)."""
    clock = OpClock()
    begin = perf_counter_ns()
    with clock:
        call()
    end = perf_counter_ns()
    ops, last = [], begin
    for name, start, stop in clock.calls:
        ops.append((name, (stop - start) / 1e3, (start - last) / 1e3))
        last = stop
    return ops, (end - begin) / 1e3


def host_sample(step: Callable[[int], None], gpu: bool, calls: int = PLAIN_CALLS) -> dict[str, Any]:
    """Host µs of ``calls`` plain calls ``step(0..calls-1)`` and one clocked call, behind a sleep kernel on a GPU
    (``gpu_busy``: whether the sleep outlasted them, so that no call waited for the device); then of ``calls``
    plain calls each launched onto an idle device (``idle_us``: a synchronize before each), as a host-bound
    eager layer launches."""
    done = None
    if gpu:
        torch.cuda._sleep(SLEEP_CYCLES)
        done = torch.cuda.Event()
        done.record()
    plain = []
    for i in range(calls):
        start = perf_counter_ns()
        step(i)
        plain.append((perf_counter_ns() - start) / 1e3)
    ops, clocked = clocked_call(lambda: step(calls))
    busy = True if done is None else not done.query()
    idle = []
    for i in range(calls):
        if gpu:
            torch.cuda.synchronize()
        start = perf_counter_ns()
        step(i)
        idle.append((perf_counter_ns() - start) / 1e3)
    if gpu:
        torch.cuda.synchronize()
    return {"plain_us": plain, "clocked_us": clocked, "ops": ops, "gpu_busy": busy, "idle_us": idle}


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """A case's samples (one per round) as medians: the host-only layer time, the clocked call's, and per torch
    function call of the most common call sequence its median µs inside and before."""
    sequences = Counter(tuple(name for name, _, _ in s["ops"]) for s in samples)
    names, count = sequences.most_common(1)[0]
    same = [s["ops"] for s in samples if tuple(name for name, _, _ in s["ops"]) == names]
    return {
        "host_only_us": statistics.median(x for s in samples for x in s["plain_us"]),
        **({"host_idle_us": statistics.median(x for s in samples for x in s["idle_us"])}
           if all(s.get("idle_us") for s in samples) else {}),
        "host_clocked_us": statistics.median(s["clocked_us"] for s in samples),
        "host_samples": len(samples),
        "host_gpu_busy": sum(s["gpu_busy"] for s in samples) / len(samples),
        "host_ops_sequences": len(sequences),
        "host_ops": [{"name": name, "us": round(statistics.median(o[k][1] for o in same), 3),
                      "before_us": round(statistics.median(o[k][2] for o in same), 3)}
                     for k, name in enumerate(names)],
        "host_ops_samples": count,
    }
