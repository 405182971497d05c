"""Kernel durations of one trace laid over the kernels of another trace of the same program.

A CUDA-graph trace carries no ``record_function`` ranges or operator shapes, but its kernels ran as a graph
replay runs them (back to back, warm clocks). When the graph trace holds ``L`` replayed copies of the eager
trace's GPU ops in the same order, the eager op at position ``i`` takes the mean duration of the graph ops
at positions ``i, i + n, …, i + (L - 1) n`` (``n`` = the eager op count). The mapping is by position only;
it is refused unless every kernel of the replayed trace faces kernels of the same name. A copy (memcpy or
memset) may face any op but one of the replayed trace's kernels: a graph may run a copy node as a copy kernel
or run independent copy nodes in another order; the copy takes the mean duration of what it faces. When the
replayed trace itself holds ``N`` layer calls (``layers``: an eager trace's ``moesim_layers_per_trace``), ``n``
is its op count over ``N`` and its op at position ``i`` maps to the graph ops at ``i mod n, i mod n + n, …``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from simulator.errors import InputError
from simulator.kineto.events import GpuOp, Trace
from simulator.kineto.program import HostTrace, Item


def overlay_durations(host: HostTrace, other: Trace, layers: int = 1) -> tuple[str, float]:
    """Replace the duration of every launched GPU op of ``host`` (which holds ``layers`` layer calls) by the
    mean of its layer position's copies in ``other`` (same device as ``host``); returns a note saying what was
    done and the median gap between back-to-back ops on a stream of ``other`` (a graph trace's node gap, as
    the profiler widened it: reported, not replayed)."""
    launches = [item for item in host.items if item.kind == "launch" and item.gpu is not None]
    ops = sorted((op for op in other.gpu_ops if op.device == host.device), key=lambda o: o.ts)
    if len(launches) % layers:
        raise InputError(f"the replayed trace's {len(launches)} GPU ops are not {layers} layer calls of equal "
                         "length")
    n = len(launches) // layers
    if n == 0 or not ops or len(ops) % n:
        raise InputError(f"{other.source}: {len(ops)} GPU ops on device {host.device} are not a whole number "
                         f"of copies of the replayed trace's {n}" + (f" per layer ({layers} layers)" if layers > 1
                                                                    else ""))
    copies = len(ops) // n
    order = sorted(range(len(launches)), key=lambda k: _gpu(launches[k]).ts)
    kernels = {_gpu(item).name for item in launches if _gpu(item).kind == "kernel"}
    mapped = "mapped by position"
    try:
        for pos, k in enumerate(order):
            mine = _gpu(launches[k])
            same = ops[pos % n::n]
            for op in same:
                if _mismatch(mine, op, kernels):
                    raise InputError(f"{other.source}: GPU op #{pos} is {op.name!r}, the replayed trace has "
                                     f"{mine.name!r} there; kernel sequences differ")
            launches[k].gpu = mine._replace(dur=statistics.fmean(op.dur for op in same))
    except InputError:
        if len({_gpu(item).stream for item in launches}) < 2:
            raise
        _by_occurrence(launches, order, ops, n, kernels, other.source)
        mapped = ("mapped by name and occurrence within the layer: streams ran in another order than in the "
                  "replayed trace")
    gaps = []
    end: dict[int, float] = {}
    for op in ops:
        if op.stream in end:
            gaps.append(op.ts - end[op.stream])
        end[op.stream] = max(end.get(op.stream, op.ts), op.ts + op.dur)
    gap = max(0.0, statistics.median(gaps)) if gaps else 0.0
    return (f"kernel durations from {other.source} ({copies} replayed copies of the {n} GPU ops, {mapped})"), gap


def _by_occurrence(launches: list[Item], order: list[int], ops: list[GpuOp], n: int, kernels: set[str],
                   source: str) -> None:
    """Multi-stream traces: the ``j``-th kernel named X of a layer takes the mean duration of the ``j``-th ones
    of that name in the other trace's copies (copies, and kernels the replayed trace lacks, likewise as one
    kind); refused unless every layer holds the same kernels."""
    copy = "<copy>"
    theirs = occurrence_keys([op.name if op.kind == "kernel" and op.name in kernels else copy for op in ops], n)
    durations: dict[tuple[str, int], list[float]] = {}
    for key, op in zip(theirs, ops, strict=True):
        durations.setdefault(key, []).append(op.dur)
    mine = occurrence_keys([_gpu(launches[k]).name if _gpu(launches[k]).kind == "kernel" else copy for k in order], n)
    for key, k in zip(mine, order, strict=True):
        if key not in durations:
            raise InputError(f"{source}: the replayed trace has {key[0]!r} {key[1] + 1} time(s) per layer, the "
                             "durations trace fewer; kernel sets differ")
        launches[k].gpu = _gpu(launches[k])._replace(dur=statistics.fmean(durations[key]))


def occurrence_keys(names: Sequence[str], period: int) -> list[tuple[str, int]]:
    """Each name with its occurrence (0 for the first) within its period of ``period`` names: the key that matches
    a kernel across two traces (or strategies) of the same layer whose streams interleave differently."""
    seen: dict[str, int] = {}
    out = []
    for pos, name in enumerate(names):
        if pos % period == 0:
            seen.clear()
        seen[name] = seen.get(name, -1) + 1
        out.append((name, seen[name]))
    return out


def _mismatch(mine: GpuOp, op: GpuOp, kernels: set[str]) -> bool:
    """Whether ``op`` cannot stand for ``mine``: a kernel needs a kernel of its name; a copy anything but one
    of the replayed trace's kernels."""
    if mine.kind == "kernel":
        return op.kind != "kernel" or op.name != mine.name
    return op.kind == "kernel" and op.name in kernels


def _gpu(item: Item) -> GpuOp:
    assert item.gpu is not None
    return item.gpu
