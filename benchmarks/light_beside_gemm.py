"""A light kernel beside a full-SM shared GEMM, by which of the two started first, from the placement probe's
profiled replays (``calibration.microbench.placement_probe``, H200).

Each probe graph holds one step per weight set; in its forked graph ``S|R`` the shared GEMM (aux stream) and the
routing step (main stream) start in either order from step to step, as the layers of a replayed decode graph do
(block ``decode-fork-order``). Per step this pairs the shared GEMM with the routing step's light kernel (the cast
ahead of the fp32 router, or the top-k / softmax / sort / gather kernel of the ``--op`` runs) and sorts it by the
kernel's start minus the GEMM's: *kernel first* (negative), *GEMM first by under 1 µs*, or *GEMM running* (it
started 5 µs or more before and has not ended: all its blocks resident). Steps where the kernel started after
the GEMM ended are left out. Per shared GEMM (its blocks, one per SM, and its share of
the HBM ceiling: weight bytes / solo time / the h200 profile's copy ceiling) and order it prints the light
kernel's median slowdown (time beside / its median time alone in the ``R`` graph's later steps) and how many of
the kernels outlasted the GEMM: a kernel that waits for the GEMM's SMs ends after the GEMM. The last column is
the h200 profile's memory-latency curve for the kernel's class at that HBM share (what the model slows a
latency-bound kernel by). Not run on AMD hardware.

    PYTHONPATH=. python benchmarks/light_beside_gemm.py [--probe DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.fit_latency import LATENCY_OPS, graph_kernels, hbm_share, records, shared_gemm
from simulator.errors import InputError, print_or_fail
from simulator.placement import latency_class

PROBE = Path("calibration/measurements/h200/2026-12-03/placement_probe")
ORDERS = ("kernel first", "GEMM first by < 1 µs", "GEMM running ≥ 5 µs")
CAST = "cast"


@dataclass(frozen=True)
class Beside:
    """One step of a forked probe graph: the shared GEMM and the light kernel that started before it ended."""

    shared: str
    blocks: int
    share: float
    op: str
    kernel: str
    offset_us: float
    slowdown: float
    outlasted: bool


def order_of(offset_us: float) -> str | None:
    """The start order of a step by the light kernel's start minus the GEMM's (None: 1 to 5 µs, neither)."""
    if offset_us < 0:
        return ORDERS[0]
    if offset_us < 1.0:
        return ORDERS[1]
    return ORDERS[2] if offset_us >= 5.0 else None


def light_kernel(alone: list[dict[str, Any]], op: str) -> int:
    """The routing step's light kernel among its kernels ``alone`` (the ``R`` graph), as its index into the
    record's kernel names: its first kernel (the cast) in the router runs, else its longest."""
    return alone[0]["name"] if op == CAST else max(alone, key=lambda r: r["dur_us"])["name"]


def steps(record: dict[str, Any], op: str, hbm_bytes_per_us: float) -> Iterator[Beside]:
    """Every step of the record's ``S|R`` graph: the i-th shared GEMM with the i-th light kernel."""
    gemm = shared_gemm(record)
    if gemm is None:
        return
    alone = graph_kernels(record, "R")
    if not alone:
        raise InputError(f"{record.get('shared')}: a probe record without its R graph")
    name = light_kernel(alone, op)
    names = record["kernels"]["names"]
    durations = [r["dur_us"] for r in alone if r["name"] == name]
    solo = statistics.median(durations[1:] or durations)  # the first step of a replay runs slow
    forked = graph_kernels(record, "S|R")
    gemms = [r for r in forked if r["name"] == gemm["name"]]
    lights = [r for r in forked if r["name"] == name]
    blocks = gemm["grid"][0] * gemm["grid"][1] * gemm["grid"][2]
    share = hbm_share(record, gemm, hbm_bytes_per_us)
    for g, k in zip(gemms, lights, strict=False):
        if k["start_us"] >= g["start_us"] + g["dur_us"]:
            continue  # it ran after the GEMM, not beside it
        yield Beside(record["shared"], blocks, share, op, names[name], k["start_us"] - g["start_us"],
                     k["dur_us"] / solo, k["start_us"] + k["dur_us"] > g["start_us"] + g["dur_us"])


def probe_steps(probe: Path, hbm_bytes_per_us: float) -> list[Beside]:
    """The steps of the cast (the fp32 router runs) and of each latency-bound op's runs under ``probe``."""
    runs = [(CAST, probe / "placement_probe_fp32.json.gz")]
    runs += [(op, probe / f"placement_probe_{op}.json.gz") for op in LATENCY_OPS]
    return [step for op, path in runs for record in records(path) for step in steps(record, op, hbm_bytes_per_us)]


def markdown(probe: Path = PROBE) -> str:
    """The table: per light kernel, shared GEMM and start order, the slowdown and the kernels that outlasted."""
    from simulator.profile import load_profile

    profile = load_profile("h200")
    curve = profile.memory_latency
    if curve is None:
        raise InputError("the h200 profile has no memory_latency curve")
    found = probe_steps(probe, profile.hbm_bytes_per_us)
    groups: dict[tuple[str, str, int, str], list[Beside]] = {}
    for step in found:
        order = order_of(step.offset_us)
        if order is not None:
            groups.setdefault((step.op, step.shared, step.blocks, order), []).append(step)
    lines = [f"Probe runs: `{probe}` (H200; {len(found)} forked steps). HBM share: the shared GEMM's weight bytes / "
             f"its solo kernel time / {profile.hbm_bytes_per_us / 1e3:.0f} GB/s (the h200 profile's copy ceiling). "
             "Slowdown: the light kernel's time beside the GEMM / alone, median over the steps of that order. "
             "Outlasted: steps where the kernel ended after the GEMM. Model: the h200 profile's memory-latency "
             "curve for the kernel's class at that share. Not run on AMD hardware.", "",
             "| light kernel | shared GEMM (blocks) | HBM share | start order | steps | slowdown, median (min–max) "
             "| outlasted the GEMM | model's latency slowdown |",
             "| --- | --- | ---: | --- | ---: | --- | ---: | ---: |"]
    ops = (CAST, *LATENCY_OPS)
    for (op, shared, blocks, order), group in sorted(
            groups.items(), key=lambda kv: (ops.index(kv[0][0]), kv[1][0].share, ORDERS.index(kv[0][3]))):
        slow = [s.slowdown for s in group]
        share = statistics.median(s.share for s in group)
        model = curve.slowdown(min(1.0, share), latency_class(group[0].kernel))
        lines.append(f"| {op} | {shared} ({blocks}) | {share:.2f} | {order} | {len(group)} | "
                     f"{statistics.median(slow):.1f}× ({min(slow):.1f}–{max(slow):.1f}) | "
                     f"{sum(s.outlasted for s in group)} | {model:.1f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", type=Path, default=PROBE, help=f"placement probe folder (default {PROBE})")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.probe))


if __name__ == "__main__":
    sys.exit(main())
