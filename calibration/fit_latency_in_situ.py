"""Latency-bound kernels' slowdown under the others' HBM load, measured where it happens: the routing chain of the
real layer beside its shared experts, in the layer traces (call 19).

Per point of a layer-trace run at 1/2/4 tokens (``kernels_real.bench --trace-timed-graphs``), each main-stream
kernel of the multi_stream layer that starts before the first grouped GEMM (the routing chain) is matched by
(name, occurrence) with the sequential layer: its slowdown is its duration beside the aux stream over its median
duration alone. The HBM share beside it is that of the aux kernels overlapping it, weighted by overlap: each aux
kernel's bytes over its solo time against the profile's HBM ceiling, read from the sequential *eager* trace of the
same point (``eager_traces/``: shapes recorded; a graph trace has none). Classes are
``simulator.placement.latency_class``'s; the GEMM kernels of light blocks (the router's GEMV, split-K
reductions) take the gather class, as block placement slows them.

:func:`memory_latency` keeps, per class and pooled over them, the median slowdown in each band of HBM share
(at the band's middle; a band needs ``MIN_KERNELS`` kernels), made non-decreasing (a kernel does not speed up as
the load grows): the profile's ``memory_latency``. Nothing is fitted: the points are medians of kernel-level
co-run measurements; no layer-level gain enters them.

The placement probe's curves (``calibration.fit_latency``) are the same quantity in a controlled pair, one
routing kernel beside one shared GEMM; in the layer traces the routing chain's kernels slowed more at the same
HBM share (``benchmarks/latency_classes.py`` sets the two side by side).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibration.layer_traces import (
    aux_stream,
    is_grouped_gemm,
    keyed,
    layers_of,
    load_kernel_records,
    replays_per_trace,
)
from simulator.errors import InputError
from simulator.kineto.replay import load_host
from simulator.placement import latency_class
from simulator.profile import Profile

BANDS = (0.1, 0.3, 0.5, 0.7, 0.9, 1.01)  # upper edges of the HBM-share bands
CLASSES = ("gather", "softmax", "topk", "sort")
GEMV = "GEMM kernels of light blocks"
SMALL_TOKENS = (1, 2, 4)
MIN_KERNELS = 8  # kernels a band needs for its median to stand in a curve

Slowdown = tuple[str, float, float]  # (class, HBM share beside it, slowdown)


def band(share: float) -> int:
    """The index of the band ``share`` falls in (a share above the ceiling in the last)."""
    return next(i for i, edge in enumerate(BANDS) if min(share, 1.0) < edge)


def band_middle(i: int) -> float:
    """The share at the middle of band ``i`` (the last band's top taken at the ceiling)."""
    return ((0.0 if i == 0 else BANDS[i - 1]) + min(BANDS[i], 1.0)) / 2


def eager_demands(trace: Path, profile: Profile | None = None) -> dict[tuple[str, int], tuple[float, bool]]:
    """(kernel name, occurrence) → (HBM share it draws alone, whether it is a GEMM kernel of light blocks), first
    layer call of a sequential eager trace; shares of ``profile``'s HBM ceiling (default: the shipped profile
    matching the traced GPU)."""
    _, _, host = load_host(trace, profile, None, None, False)
    seen: Counter[str] = Counter()
    out: dict[tuple[str, int], tuple[float, bool]] = {}
    for item in host.items:
        if item.gpu is None or item.kind != "launch":
            continue
        name = item.gpu.name
        key = (name, seen[name])
        seen[name] += 1
        demand = item.demand
        out.setdefault(key, (demand.bw, demand.blocks is not None and (demand.blocks_per_sm or 1) > 1))
    return out


def slowdowns(run: Path, eager: Path, holdout_presets: Sequence[str] = (),
              profile: Profile | None = None) -> list[Slowdown]:
    """(class, HBM share beside it, slowdown) of every routing-chain kernel of every layer of ``run`` at 1/2/4
    tokens that the eager run traced too; the GEMM kernels of light blocks as class :data:`GEMV`. The presets of
    ``holdout_presets`` and their rank variants are left out; shares of ``profile``'s HBM ceiling."""
    records = {(r["preset"], r["tokens"], r["strategy"]): r for r in load_kernel_records(run)
               if r["mode"] == "graph" and r["preset"].split("@")[0] not in holdout_presets}
    out = []
    for (preset, tokens, strategy), sequential in sorted(records.items()):
        multi = records.get((preset, tokens, "multi_stream"))
        trace = eager / "traces" / f"{preset}_t{tokens}_sequential_eager.json.gz"
        if strategy != "sequential" or tokens not in SMALL_TOKENS or multi is None or not trace.is_file():
            continue
        demands = eager_demands(trace, profile)
        replays = replays_per_trace(run / sequential["trace"])  # both strategies traced alike (one command)
        alone: dict[tuple[str, int], list[float]] = defaultdict(list)
        for layer in layers_of(sequential, replays):
            for key, k in keyed(layer).items():
                alone[key].append(k["dur_us"])
        for layer in layers_of(multi, replays):
            aux = aux_stream(layer)
            kernels = list(keyed(layer).items())
            grouped = [k["start_us"] for _, k in kernels if k["stream"] != aux and is_grouped_gemm(k["name"])]
            if not grouped:
                continue
            beside = [(key, k) for key, k in kernels if k["stream"] == aux]
            for key, k in kernels:
                if k["stream"] == aux or k["start_us"] >= min(grouped) or key not in alone or k["dur_us"] <= 0:
                    continue
                start, end = k["start_us"], k["start_us"] + k["dur_us"]
                share = sum(max(0.0, min(end, a["start_us"] + a["dur_us"]) - max(start, a["start_us"])) / (end - start)
                            * demands.get(akey, (0.0, False))[0] for akey, a in beside)
                cls = GEMV if demands.get(key, (0.0, False))[1] else latency_class(key[0])
                out.append((cls, share, k["dur_us"] / statistics.median(alone[key])))
    return out


def curve(rows: list[Slowdown], classes: tuple[str, ...]) -> list[tuple[float, float]]:
    """(band middle, median slowdown) of the rows of ``classes`` in every band with :data:`MIN_KERNELS` of them,
    in order of the share, made non-decreasing; ``[(0, 1)]`` where no band has enough."""
    cells: dict[int, list[float]] = defaultdict(list)
    for cls, share, slow in rows:
        if cls in classes:
            cells[band(share)].append(slow)
    points, top = [], 1.0
    for i in sorted(cells):
        if len(cells[i]) >= MIN_KERNELS:
            top = max(top, statistics.median(cells[i]))
            points.append((round(band_middle(i), 4), round(top, 4)))
    return points or [(0.0, 1.0)]


def memory_latency(run: Path, eager: Path, where: str, holdout_presets: Sequence[str] = (),
                   profile: Profile | None = None) -> dict[str, Any]:
    """The profile's ``memory_latency`` document from the layer traces of ``run`` and the eager traces of
    ``eager`` (``where``: how the source names them), ``holdout_presets`` left out, HBM shares of ``profile``'s
    ceiling: the pooled curve and one per class."""
    rows = [(("gather" if cls == GEMV else cls), share, slow)
            for cls, share, slow in slowdowns(run, eager, holdout_presets, profile)]
    if not rows:
        raise InputError(f"{run}: no routing-chain kernel at 1/2/4 tokens with an eager trace of its point "
                         f"in {eager}")
    return {"points": curve(rows, CLASSES), "classes": {cls: curve(rows, (cls,)) for cls in CLASSES},
            "source": f"measured in situ: the routing chain's kernels beside the shared experts in the layer traces "
                      f"at 1/2/4 tokens ({where}; {len(rows)} kernels): per kernel its time beside the aux stream / "
                      f"alone, against the share of the HBM ceiling the overlapping aux kernels draw (their bytes / "
                      f"solo time, from the sequential eager traces); median per band of that share (at least "
                      f"{MIN_KERNELS} kernels), made non-decreasing, pooled (points) and per class (the GEMM kernels "
                      f"of light blocks with gather); nothing fitted"}
