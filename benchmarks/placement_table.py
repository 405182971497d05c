"""The router GEMM beside a shared-expert GEMM, from ``calibration.microbench.placement_probe`` runs: per shared
GEMM shape (with the blocks its cuBLAS grid holds, one per SM) and router (fp32 and bf16), the medians of S, R
and S|R at one token count and the overlap 1 − (S|R) / (S + R): negative where the pair runs slower than in
sequence. For the fp32 router GEMM kernel also its time alone and beside S (profiled replays, median over the
weight sets) and what the model's packing law predicts (``simulator.placement.packing_slowdown`` with the h200
profile's ``issue_warps``, measured on these very records: read the column as a check of the law's form, not as
held-out): its blocks, one per SM alone, packed onto the SMs the shared GEMM's blocks leave free and kept there;
the busiest SM holds ceil(blocks / free SMs) of them and runs their warps at full speed up to ``issue_warps``,
slower in proportion past it. Where its blocks do not all fit on the free SMs (blocks per SM from its registers,
threads and shared memory against the H200's limits) the rest wait for the shared GEMM: "waits" instead of a
figure.

``--op topk|softmax|sort|gather`` prints instead the runs that put one of the latency-bound routing kernels
beside S: per shared GEMM and preset sizes, the kernel's blocks × threads, its time alone and beside S, and the
pair's overlap.

``--call34`` checks the packing law, with each router kernel's class figure (``issue_warps_by_kernel``), on call
34's routers (Kimi-K2's xmma kernel, Llama-4-Maverick's SIMT sgemm) beside every shared GEMM.

``--contention`` tabulates those kernels' slowdown against the shared GEMM's HBM share. ``--prefill --tokens
16|128|1024`` prints the runs of call 26 (every routing step beside each shared GEMM at that token count).

    PYTHONPATH=. python benchmarks/placement_table.py [--tokens 2] [--op topk [--sized-as deepseek_v3]]
    PYTHONPATH=. python benchmarks/placement_table.py --contention
    PYTHONPATH=. python benchmarks/placement_table.py --prefill --tokens 1024
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from calibration.fit_latency import (
    LATENCY_OPS,
    blocks_per_sm,
    gpu_op,
    hbm_share,
    main_kernel,
    records,
    shared_gemm,
)
from simulator.errors import InputError, print_or_fail
from simulator.kineto.demand import op_family, tracks_placement
from simulator.placement import issue_class, packing_slowdown, placement_for

SM_COUNT = 132  # the probe's GPU, an H200
PROBE = Path("calibration/measurements/h200/2026-12-03/placement_probe")
RUNS = {"fp32": PROBE / "placement_probe_fp32.json.gz", "bf16": PROBE / "placement_probe_bf16.json.gz"}
CALL34 = PROBE / "placement_probe_fp32_call34.json.gz"


def grid_blocks(kernel: dict[str, Any] | None) -> int | None:
    """Blocks of a probe kernel's grid (None without one)."""
    return math.prod(kernel["grid"]) if kernel is not None and kernel.get("grid") else None


def shared_blocks(record: dict[str, Any]) -> int | None:
    """Blocks of the shared GEMM's kernel."""
    return grid_blocks(shared_gemm(record))


def router_geometry(record: dict[str, Any], router: dict[str, Any]) -> tuple[int, int, int]:
    """The router kernel's blocks, blocks per SM and warps per block."""
    return math.prod(router["grid"]), blocks_per_sm(record, router), -(-math.prod(router["block"]) // 32)


def router_times(record: dict[str, Any]) -> tuple[int, int, int, float, float]:
    """The router GEMM kernel's blocks, blocks per SM and warps per block, and its median duration alone and
    beside the shared GEMM."""
    router, solo, beside = main_kernel(record)
    return (*router_geometry(record, router), solo, beside)


def packed_us(solo_us: float, blocks: int, per_sm: int, warps: int, shared_blocks: int,
              issue_warps: float) -> float | None:
    """The packing law: the router's blocks on the SMs left free, at 1 / ``packing_slowdown`` of their solo
    rate; None where they do not all fit there (the rest wait for the shared GEMM's blocks to retire)."""
    free = SM_COUNT - shared_blocks
    if free <= 0 or blocks > free * per_sm:
        return None
    return solo_us * packing_slowdown(blocks, warps, free, SM_COUNT, issue_warps)


def overlap(med: dict[str, float]) -> float:
    return 1 - med["S|R"] / (med["S"] + med["R"])


def markdown(tokens: int) -> str:
    from simulator.profile import load_profile

    profile = load_profile("h200")
    if profile.issue_warps is None:
        raise InputError(f"profile {profile.name}: no issue_warps (refit with the placement probe's router runs)")
    issue_warps = profile.issue_warps.value
    by_dtype = {dtype: {(r["shared"], r["router"]): r for r in records(path) if r["tokens"] == tokens}
                for dtype, path in RUNS.items()}
    lines = [f"{tokens} token(s); µs per step, medians of event-timed graph replays; overlap = 1 − (S|R) / (S + R).",
             f"Packing law: {profile.describe()}'s issue_warps {issue_warps:.2f} warps per SM.",
             "", "| shared GEMM (blocks) | router | S | R fp32 | S\\|R fp32 | overlap fp32 | router kernel: blocks, "
             "alone → beside S (packing law) | R bf16 | S\\|R bf16 | overlap bf16 |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for key, fp32 in by_dtype["fp32"].items():
        bf16 = by_dtype["bf16"].get(key)
        m32, held = fp32["median_us"], shared_blocks(fp32)
        blocks, per_sm, warps, solo, beside = router_times(fp32)
        law = packed_us(solo, blocks, per_sm, warps, held, issue_warps) if held is not None else None
        row = (f"| {key[0]} ({held}) | {key[1]} | {m32['S']:.1f} | {m32['R']:.1f} | {m32['S|R']:.1f} | "
               f"{100 * overlap(m32):+.0f} % | {blocks}, {solo:.1f} → {beside:.1f} "
               f"({'waits' if law is None else f'{law:.1f}'}) |")
        if bf16 is None:
            row += " n/a | n/a | n/a |"
        else:
            m16 = bf16["median_us"]
            row += f" {m16['R']:.1f} | {m16['S|R']:.1f} | {100 * overlap(m16):+.0f} % |"
        lines.append(row)
    return "\n".join(lines)


def law_markdown(run: Path, routers: tuple[str, ...]) -> str:
    """The packing law against one probe run's routers (``routers``), at every token count and shared GEMM: per
    record the router kernel's class and the warps an SM runs at full speed for it (the h200 profile's figure for
    that class), its blocks and warps on the busiest SM alone and beside S, and its slowdown beside S, measured
    and by the law (``simulator.placement``: packed for life, or partly packed with the rest waiting for S)."""
    from simulator.profile import load_profile

    profile = load_profile("h200")
    sharing = placement_for(profile)
    lines = [f"Probe run `{run}`; the law with {profile.describe()}'s issue warps per kernel class.", "",
             "| router | tokens | shared GEMM (blocks) | router kernel (class, warps at full speed) | blocks × warps | "
             "busiest SM alone → beside S (blocks) | slowdown beside S: measured | law |",
             "| --- | ---: | --- | --- | --- | --- | ---: | ---: |"]
    offs = []
    for record in records(run):
        if record["router"] not in routers:
            continue
        kernel, solo, beside = main_kernel(record)
        op = gpu_op(record, kernel)
        name = op.name
        blocks, per_sm, warps = router_geometry(record, kernel)
        if per_sm == 1 or not tracks_placement(op, op_family(op, None)):
            continue  # not a GEMM of light blocks: the law is not its
        gemm = shared_gemm(record)
        held = grid_blocks(gemm)
        issue = sharing.warps_at_full_speed(name)
        free = SM_COUNT - (held or 0)
        packed = free > 0 and math.ceil(blocks / free) > math.ceil(blocks / SM_COUNT)
        law = (packing_slowdown(blocks, warps, free, SM_COUNT, issue, per_sm)
               if packed and issue is not None and blocks_per_sm(record, gemm) == 1 else None)
        partial = law is not None and blocks > free * per_sm
        if law is not None and not partial:
            offs.append(abs(beside / solo - law) / (beside / solo))
        busiest = f"{math.ceil(blocks / SM_COUNT)} → {min(per_sm, math.ceil(blocks / free)) if free > 0 else 0}"
        shown = "—" if law is None else f"{law:.2f}×" + (" (partly packed)" if partial else "")
        lines.append(f"| {record['router']} | {record['tokens']} | {record['shared']} ({held}) | "
                     f"{name[:32]} ({issue_class(name) or 'default'}, {issue:.1f}) | {blocks} × {warps} | {busiest} "
                     f"| {beside / solo:.2f}× | {shown} |")
    lines.insert(1, f"Records packed whole: {len(offs)}; the law off the measured slowdown by median "
                    f"{100 * statistics.median(offs):.0f} %, worst {100 * max(offs):.0f} %. — : not packed denser "
                    "than alone; partly packed: only some blocks fit on the free SMs, the law gives theirs, and the "
                    "rest wait for S (not counted)." if offs else "No record packed whole.")
    return "\n".join(lines)


def op_markdown(op: str, tokens: int, sized_as: str | None = None) -> str:
    """The runs with a latency-bound routing kernel as ``R``: how it fares beside the shared GEMMs."""
    lines = [f"{op}, {tokens} token(s); the kernel's time alone → beside S from profiled replays (µs, median over "
             "the weight sets); overlap = 1 − (S|R) / (S + R) of the timed medians.", "",
             "| shared GEMM (blocks) | sized as | kernel: blocks × threads | alone → beside S (µs) | overlap |",
             "| --- | --- | --- | --- | ---: |"]
    for record in records(PROBE / f"placement_probe_{op}.json.gz"):
        if record["tokens"] != tokens or (sized_as is not None and record["router"] != sized_as):
            continue
        kernel, solo, beside = main_kernel(record)
        lines.append(f"| {record['shared']} ({shared_blocks(record)}) | {record['router']} | "
                     f"{math.prod(kernel['grid'])} × {math.prod(kernel['block'])} | {solo:.1f} → {beside:.1f} | "
                     f"{100 * overlap(record['median_us']):+.0f} % |")
    return "\n".join(lines)


def prefill_markdown(tokens: int, sized_as: str = "deepseek_v3") -> str:
    """The call-26 runs at one token count: per shared GEMM (its kernel's blocks at that M) and routing step
    (sized as ``sized_as``), the pair's overlap and the routing step's main kernel alone → beside S."""
    ops = ("router", *LATENCY_OPS)
    by_op = {op: {r["shared"]: r for r in records(PROBE / f"placement_probe_{op}_prefill.json.gz")
                  if r["tokens"] == tokens and r["router"] == sized_as} for op in ops}
    if not any(by_op.values()):
        raise InputError(f"no placement-probe run at {tokens} tokens sized as {sized_as} (call 26 has 16, 128, "
                         "1024 tokens; deepseek_v3, qwen2_57b_a14b)")
    lines = [f"{tokens} tokens, routing sized as {sized_as}; per cell: overlap = 1 − (S|R) / (S + R) of the timed "
             "medians, then the routing step's main kernel alone → beside S (µs, profiled replays). The router is "
             "the fp32 GEMM after its cast.", "",
             "| shared GEMM (blocks) | " + " | ".join(ops) + " |", "| --- |" + " --- |" * len(ops)]
    for shared in by_op["router"]:
        cells = []
        for op in ops:
            record = by_op[op].get(shared)
            if record is None:
                cells.append("n/a")
                continue
            _, solo, beside = main_kernel(record)
            cells.append(f"{100 * overlap(record['median_us']):+.0f} % ({solo:.1f} → {beside:.1f})")
        lines.append(f"| {shared} ({shared_blocks(by_op['router'][shared])}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def contention_markdown() -> str:
    """Per latency-bound routing kernel and shared GEMM that leaves SMs free: the GEMM's HBM share (its weight
    bytes over its solo time, against the h200 profile's measured copy ceiling) and the kernel's median slowdown
    beside it, over presets and token counts."""
    from simulator.profile import load_profile

    hbm = load_profile("h200").hbm_bytes_per_us
    lines = [f"HBM share of S = its weight bytes / its solo kernel time / {hbm / 1e3:.0f} GB/s (the h200 profile's "
             "measured copy ceiling); slowdown = the routing kernel's time beside S / alone, median over the 4 "
             "presets' sizes × 1, 2, 4 tokens. The shared GEMMs holding 128 or more SMs are left out (block "
             "`decode-light-beside-gemm` has them, by start order).", "",
             "| shared GEMM (blocks) | HBM share of S | " + " | ".join(f"{op} slowdown" for op in LATENCY_OPS) + " |",
             "| --- | ---: |" + " ---: |" * len(LATENCY_OPS)]
    by_shared: dict[str, dict[str, list[float]]] = {}
    share: dict[str, tuple[int, list[float]]] = {}
    for op in LATENCY_OPS:
        for record in records(PROBE / f"placement_probe_{op}.json.gz"):
            gemm, held = shared_gemm(record), shared_blocks(record)
            if gemm is None or held is None or held >= 128:
                continue
            _, solo, beside = main_kernel(record)
            share.setdefault(record["shared"], (held, []))[1].append(hbm_share(record, gemm, hbm))
            by_shared.setdefault(record["shared"], {}).setdefault(op, []).append(beside / solo)
    for name in sorted(share, key=lambda n: statistics.median(share[n][1])):
        held, shares = share[name]
        cells = " | ".join(f"{statistics.median(by_shared[name][op]):.2f}" if op in by_shared[name] else "n/a"
                           for op in LATENCY_OPS)
        lines.append(f"| {name} ({held}) | {statistics.median(shares):.2f} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2, help="token count (the probe has 1, 2, 4; default 2)")
    ap.add_argument("--op", choices=LATENCY_OPS, help="a latency-bound routing kernel's runs instead of the router's")
    ap.add_argument("--sized-as", metavar="PRESET", help="with --op: only the runs sized as this preset")
    ap.add_argument("--contention", action="store_true",
                    help="the latency-bound kernels' slowdown against the shared GEMM's HBM share")
    ap.add_argument("--prefill", action="store_true",
                    help="call 26's runs at --tokens (16, 128 or 1024): every routing step beside each shared GEMM")
    ap.add_argument("--call34", action="store_true",
                    help="call 34's Kimi-K2 and Llama-4-Maverick routers: the packing law (per kernel class) against "
                         "their measured slowdown beside every shared GEMM, at 1/2/4 tokens")
    args = ap.parse_args(argv)

    def report() -> str:
        if args.call34:
            return law_markdown(CALL34, ("kimi_k2", "llama4_maverick"))
        if args.contention:
            return contention_markdown()
        if args.prefill:
            return prefill_markdown(args.tokens, args.sized_as or "deepseek_v3")
        return op_markdown(args.op, args.tokens, args.sized_as) if args.op else markdown(args.tokens)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
