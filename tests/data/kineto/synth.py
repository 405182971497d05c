"""Builds small Kineto traces with hand-computable timelines (the way torch.profiler writes them).

Host: each API call starts where the previous one ended (``call_us`` long unless given). Device: a kernel
starts ``LATENCY`` after its launch call starts when its stream is idle, else ``GAP`` after its stream's
previous kernel (or, after a wait, after the waited work).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

LATENCY = 3.0
GAP = 1.0
PID, TID, DEV = 1000, 1001, 0
H200 = {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "computeMajor": 9,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 233472, "numSms": 132, "sharedMemPerBlockOptin": 232448}


class Synth:
    def __init__(self, t0: float = 1000.0, call_us: float = 5.0) -> None:
        self.now = t0
        self.call_us = call_us
        self.corr = 100
        self.events: list[dict[str, Any]] = []
        self.stream_end: dict[int, float] = {}
        self.stream_after: dict[int, float] = {}
        self.kernels: list[dict[str, Any]] = []

    def _call(self, name: str, dur: float | None = None) -> dict[str, Any]:
        self.corr += 1
        dur = self.call_us if dur is None else dur
        ev = {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": TID, "ts": self.now,
              "dur": dur, "args": {"cbid": 211, "correlation": self.corr}}
        self.events.append(ev)
        self.now += dur
        return ev

    def idle(self, us: float) -> None:
        """Python overhead: the host does nothing traced for ``us``."""
        self.now += us

    def launch(self, name: str, dur: float, stream: int = 7, grid: tuple[int, int, int] = (8, 1, 1),
               block: tuple[int, int, int] = (128, 1, 1), regs: int = 32, smem: int = 0) -> dict[str, Any]:
        call = self._call("cudaLaunchKernel")
        ready = call["ts"] + LATENCY
        if stream in self.stream_end:
            ready = max(ready, self.stream_end[stream] + GAP)
        ready = max(ready, self.stream_after.pop(stream, ready))
        blocks = grid[0] * grid[1] * grid[2]
        ev = {"ph": "X", "cat": "kernel", "name": name, "pid": DEV, "tid": stream, "ts": ready, "dur": dur,
              "args": {"queued": 0, "device": DEV, "context": 1, "stream": stream, "correlation": self.corr,
                       "registers per thread": regs, "shared memory": smem, "blocks per SM": blocks / 132,
                       "warps per SM": blocks * block[0] / 32 / 132, "grid": list(grid), "block": list(block),
                       "est. achieved occupancy %": 5}}
        self.events.append(ev)
        self.events.append({"ph": "s", "id": self.corr, "pid": PID, "tid": TID, "ts": call["ts"], "cat": "ac2g",
                            "name": "ac2g"})
        self.events.append({"ph": "f", "id": self.corr, "pid": DEV, "tid": stream, "ts": ready, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})
        self.stream_end[stream] = ready + dur
        self.kernels.append(ev)
        return ev

    def record(self, stream: int) -> int:
        """cudaEventRecord on ``stream``; returns its correlation id (what a later wait refers to)."""
        self._call("cudaEventRecord", 2.0)
        self._record_done = getattr(self, "_record_done", {})
        self._record_done[self.corr] = self.stream_end.get(stream, 0.0)
        return self.corr

    def wait(self, stream: int, on_stream: int, record: int, event_id: int | None = None) -> None:
        """cudaStreamWaitEvent; with ``event_id`` its cuda_sync record names only the CUDA event (record
        call and stream -1), as some Kineto builds write it."""
        self._call("cudaStreamWaitEvent", 2.0)
        named = {"wait_on_stream": on_stream, "wait_on_cuda_event_record_corr_id": record} if event_id is None \
            else {"wait_on_stream": -1, "wait_on_cuda_event_record_corr_id": -1, "wait_on_cuda_event_id": event_id}
        self.events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": DEV,
                            "tid": stream, "ts": self.now, "dur": 0,
                            "args": {"cuda_sync_kind": "Stream Wait Event", **named, "stream": stream,
                                     "correlation": self.corr, "device": DEV, "context": 1}})
        self.stream_after[stream] = self._record_done[record] + GAP

    def sync(self) -> None:
        done = max(self.stream_end.values(), default=self.now)
        self._call("cudaDeviceSynchronize", max(self.call_us, done - self.now + 2.0))

    @contextmanager
    def range(self, name: str):
        start = self.now
        ev = {"ph": "X", "cat": "user_annotation", "name": name, "pid": PID, "tid": TID, "ts": start, "dur": 0}
        self.events.append(ev)
        yield ev
        ev["dur"] = self.now - start

    @contextmanager
    def module(self, cls: str):
        """An ``nn.Module: Class_N`` python_function event around what runs inside (as ``with_stack`` writes)."""
        self._instances = getattr(self, "_instances", {})
        n = self._instances[cls] = self._instances.get(cls, -1) + 1
        start = self.now
        ev = {"ph": "X", "cat": "python_function", "name": f"nn.Module: {cls}_{n}", "pid": PID, "tid": TID,
              "ts": start, "dur": 0, "args": {"Python parent id": 0, "Python id": len(self.events),
                                              "Python module id": n}}
        self.events.append(ev)
        yield ev
        ev["dur"] = self.now - start

    @contextmanager
    def op(self, name: str, dims: list[list[int]], types: list[str] | None = None):
        start = self.now
        ev = {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": start, "dur": 0,
              "args": {"Input Dims": dims, "Input type": types or ["c10::BFloat16"] * len(dims)}}
        self.events.append(ev)
        yield ev
        ev["dur"] = self.now - start

    def span(self) -> float:
        return max(k["ts"] + k["dur"] for k in self.kernels) - min(k["ts"] for k in self.kernels)

    def document(self) -> dict[str, Any]:
        return {"schemaVersion": 1, "deviceProperties": [H200], "record_shapes": 1,
                "traceEvents": self.events, "traceName": "synthetic", "displayTimeUnit": "ms",
                "baseTimeNanoseconds": 1_700_000_000_000_000_000}

    def dumps(self) -> str:
        return json.dumps(self.document())


def moe_layer(s: Synth) -> None:
    """gate 10 µs; shared experts 2 × 30 µs; routed experts 2 × 40 µs; combine 5 µs (all on stream 7)."""
    with s.range("moe.gate"):
        s.launch("gate_gemm", 10.0)
    with s.range("moe.shared_experts"):
        s.launch("shared_up", 30.0)
        s.launch("shared_down", 30.0)
    with s.range("moe.routed_experts"):
        s.launch("routed_up", 40.0)
        s.launch("routed_down", 40.0)
    s.launch("combine_add", 5.0)


def write_large_trace(path: str, kernels: int, padding_per_kernel: int = 0) -> int:
    """Stream a big eager trace to ``path`` without holding it: ``kernels`` launches (runtime call, kernel,
    two flow ends, an operator every 4th) plus ``padding_per_kernel`` python_function events each (dropped
    by the reader). Returns the file size in bytes."""
    def dump(ev: dict[str, Any]) -> str:
        return json.dumps(ev, separators=(",", ":"))

    with open(path, "w") as out:
        out.write(f'{{"schemaVersion":1,"deviceProperties":[{dump(H200)}],"traceEvents":[')
        for i in range(kernels):
            ts = 1000.0 + 6.0 * i
            corr = 10 + i
            events = []
            if i % 4 == 0:
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": PID, "tid": TID,
                               "ts": ts - 0.2, "dur": 5.5, "args": {"Input Dims": [[16, 7168], [7168, 2048]],
                                                                     "Input type": ["c10::BFloat16"] * 2}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                           "ts": ts, "dur": 5.0, "args": {"cbid": 211, "correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": f"void gemv_kernel_{i % 50}<float>(float*)",
                           "pid": DEV, "tid": 7, "ts": ts + 3.0, "dur": 4.0,
                           "args": {"queued": 0, "device": DEV, "context": 1, "stream": 7, "correlation": corr,
                                    "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.06,
                                    "warps per SM": 0.24, "grid": [8, 1, 1], "block": [128, 1, 1],
                                    "est. achieved occupancy %": 1}})
            events.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": ts, "cat": "ac2g",
                           "name": "ac2g"})
            events.append({"ph": "f", "id": corr, "pid": DEV, "tid": 7, "ts": ts + 3.0, "cat": "ac2g",
                           "name": "ac2g", "bp": "e"})
            events += [{"ph": "X", "cat": "python_function",
                        "name": "torch/nn/modules/module.py(1736): _call_impl", "pid": PID, "tid": TID,
                        "ts": ts + 0.1 * j, "dur": 1.0, "args": {"Python parent id": i, "Python id": j}}
                       for j in range(padding_per_kernel)]
            out.write(("," if i else "") + ",".join(map(dump, events)))
        out.write('],"traceName":"large synthetic","displayTimeUnit":"ms"}')
        return out.tell()


KERNEL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::silu", "aten::mul", "aten::add", "aten::add_",
              "aten::_fused_rms_norm", "aten::rms_norm", "aten::topk", "aten::softmax", "aten::_softmax",
              "aten::sort", "aten::index_select", "aten::index_add_", "aten::scatter_add_", "aten::cumsum",
              "aten::copy_", "aten::zeros", "aten::fill_", "aten::div")


def with_kernels(doc: dict[str, Any], kernel_us: float = 10.0) -> dict[str, Any]:
    """A CPU-profiled trace made GPU-shaped: inside every operator of ``KERNEL_OPS`` (the innermost one where
    they nest) a 1 µs ``cudaLaunchKernel`` at the operator's start and a ``kernel_us`` kernel on stream 7 named
    after the operator, started 3 µs after its launch or 1 µs after the previous kernel. The module events and
    the host timeline are the profiler's own."""
    ops = sorted((e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") in KERNEL_OPS),
                 key=lambda e: (e["ts"], -e["dur"]))
    leaves = [op for n, op in enumerate(ops)
              if not (n + 1 < len(ops) and ops[n + 1]["ts"] < op["ts"] + op["dur"])]
    pid, tid = leaves[0]["pid"], leaves[0]["tid"]
    events = list(doc["traceEvents"])
    end = float("-inf")
    for n, op in enumerate(leaves):
        corr = 10_000 + n
        start = max(op["ts"] + LATENCY, end + GAP)
        end = start + kernel_us
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                       "ts": op["ts"], "dur": 1.0, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": op["name"].split("::")[-1] + "_kernel", "pid": DEV,
                       "tid": 7, "ts": start, "dur": kernel_us,
                       "args": {"device": DEV, "stream": 7, "correlation": corr, "grid": [8, 1, 1],
                                "block": [128, 1, 1], "registers per thread": 32, "shared memory": 0}})
    return {**doc, "deviceProperties": [H200], "traceEvents": events}
