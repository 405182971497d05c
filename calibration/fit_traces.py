"""Per-op device times of the real layer, from kernels_real's Kineto traces (eager ones), for the fit.

Each device event (kernel, memset, memcpy) is attributed through its runtime call's correlation id to the
outermost torch op whose host span contains that call; the layer's top-level torch ops with device work
then line up one to one with the workload builder's launches (one launch per torch op), which gives every
builder op its measured device time (the sum of its kernels) next to its modelled bytes and flops.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.errors import InputError

DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy")


@dataclass(frozen=True)
class TracedOp:
    """One top-level torch op of a traced layer call: its name, device time (µs) and device event count."""

    name: str
    device_us: float
    kernels: int


def read_trace(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as fh:
            return json.load(fh)
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read the trace ({err.__class__.__name__})") from None


def top_level_ops(trace: dict[str, Any]) -> list[TracedOp]:
    """The top-level torch ops with device work, in host order."""
    events = trace.get("traceEvents") or []
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and "dur" in e),
                 key=lambda e: (e["ts"], -e["dur"]))
    tops: list[dict[str, Any]] = []
    end = -1.0
    for e in ops:
        if e["ts"] >= end:
            tops.append(e)
            end = e["ts"] + e["dur"]
    calls = {e["args"]["correlation"]: e["ts"] for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {})}
    starts = [t["ts"] for t in tops]
    work: dict[int, list[float]] = {}
    for e in events:
        if e.get("cat") not in DEVICE_CATS:
            continue
        ts = calls.get((e.get("args") or {}).get("correlation"))
        if ts is None:
            continue
        i = _containing(starts, tops, ts)
        if i is not None:
            work.setdefault(i, []).append(float(e.get("dur", 0.0)))
    return [TracedOp(tops[i]["name"], sum(work[i]), len(work[i])) for i in sorted(work)]


def _containing(starts: Sequence[float], tops: Sequence[dict[str, Any]], ts: float) -> int | None:
    lo, hi = 0, len(starts)
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= ts:
            lo = mid + 1
        else:
            hi = mid
    i = lo - 1
    if i >= 0 and ts <= tops[i]["ts"] + tops[i]["dur"]:
        return i
    return None


def case_specs(case: dict[str, Any], profile: Any) -> list[Any]:
    """The builder's ``KernelSpec``s of one eager layer call of ``case``, in launch order."""
    from simulator.cost import CostModel
    from simulator.workloads.builder import ProgramBuilder
    from simulator.workloads.moe_layer import emit_moe_layer
    from simulator.workloads.presets import get_preset

    b = ProgramBuilder(cost=CostModel(profile))
    emit_moe_layer(b, get_preset(str(case["preset"])), int(case["tokens"]), str(case["strategy"]))
    return b.specs


def op_points(folder: Path, cases: Sequence[dict[str, Any]], profile: Any
              ) -> tuple[dict[str, list[Any]], dict[str, int], list[str]]:
    """Measured device time of every builder op that has an ``op_key``, per key, from the eager traces of
    ``cases`` (the calibration split): ``fit_kernels.Point``s (one per distinct shape, repeated shapes
    averaged), the median number of device kernels one call of the op launched, and notes on traces that could
    not be used."""
    from calibration.fit_kernels import Point

    acc: dict[str, dict[tuple[float, float, float, int | None], list[float]]] = {}
    counts: dict[str, list[int]] = {}
    notes = []
    for case in cases:
        if case.get("mode") != "eager" or not case.get("trace"):
            continue
        path = folder / str(case["trace"])
        if not path.exists():
            notes.append(f"{case['trace']}: missing")
            continue
        traced = top_level_ops(read_trace(path))
        specs = case_specs(case, profile)
        if len(traced) != len(specs):
            notes.append(f"{case['trace']}: {len(traced)} torch ops with device work, the builder has "
                         f"{len(specs)}: not aligned, skipped")
            continue
        for op, spec in zip(traced, specs, strict=True):
            if spec.op_key and op.device_us > 0:
                key = (spec.flops, spec.bytes, spec.sm, spec.rows)
                acc.setdefault(spec.op_key, {}).setdefault(key, []).append(op.device_us)
                counts.setdefault(spec.op_key, []).append(op.kernels)
    points = {k: [Point(f, b, sm, rows, sum(v) / len(v)) for (f, b, sm, rows), v in shapes.items()]
              for k, shapes in sorted(acc.items())}
    return points, {k: round(statistics.median(v)) for k, v in sorted(counts.items())}, notes
