"""Where does a kernel land when another kernel holds most SMs? The fp32 router GEMM beside a shared-expert GEMM.

The layer traces of 2026-12-03 show the routing chain's fp32 router GEMM running 3–9× longer beside the shared
experts' bf16 GEMMs (cuBLAS ``nvjet``: one block per SM that holds the SM's whole register file). This probe
measures that law directly, inside CUDA graphs: per shared GEMM shape ``S`` (chosen so that cuBLAS's grid leaves
from none to most of the SMs free), router shape ``R`` (the presets' hidden size × experts) and token count:

- ``S``: ``F.linear`` of [M, K] bf16 by one of ``SETS`` rotating [N, K] weights;
- ``R``: the layer's routing head on the main stream: ``x.float()`` then ``F.linear`` by the fp32 router weight
  (``--router-dtype bfloat16``: the same GEMM in bf16, no cast); ``--op`` puts one of the latency-bound routing
  kernels there instead (top-k, softmax, sort, gather), to see whether packing their blocks costs them;
- ``S|R``: both forked from main with an event pair, ``S`` captured first (as the layer enqueues the shared
  experts before the gate).

Each graph holds one step per weight set; 25 event-timed replays after 3 warm-ups, medians per set
(``graph_corun.capture`` / ``replay_us``). Then one profiled replay of each graph: per kernel its start,
duration, stream, grid, block, registers, shared memory, blocks per SM (``graph_corun.profile_kernels``).
``--tokens`` and ``--routers`` pick the token counts (both steps' M; e.g. 128 and 1024, where the shared GEMMs
are persistent kernels of many tiles) and the presets that size the routing step.
``python -m calibration.microbench.placement_probe --out DIR`` writes ``placement_probe.json.gz``.
torch.cuda API only (not run on AMD hardware).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from calibration.microbench.graph_corun import capture, forked, profile_kernels, replay_us
from kernels_real.bench import run_env

# (label, K, N) of the shared experts' gate_up GEMM: presets and TP shards whose cuBLAS grids (graph_corun)
# span 40..132 blocks
SHARED = (("deepseek_v3", 7168, 4096), ("deepseek_v3@tp2", 7168, 2048), ("deepseek_v3@tp8", 7168, 512),
          ("llama4_scout", 5120, 16384), ("qwen2_57b_a14b", 3584, 40960), ("qwen2_57b_a14b@tp4", 3584, 10240),
          ("deepseek_v2_lite@tp2", 2048, 2816), ("llama4_maverick@tp2", 5120, 8192),
          ("llama4_maverick@tp4", 5120, 4096), ("kimi_k2@tp4", 7168, 1024))
# (label, hidden, experts) of the fp32 router GEMM (Kimi-K2's and Llama-4-Maverick's since call 34: cuBLAS runs the
# first as a split-K sm80_xmma kernel after a memset, the second as a SIMT sgemm of 64 blocks at 2 tokens)
ROUTERS = (("deepseek_v3", 7168, 256), ("llama4_scout", 5120, 16), ("qwen2_57b_a14b", 3584, 64),
           ("deepseek_v2_lite", 2048, 64), ("kimi_k2", 7168, 384), ("llama4_maverick", 5120, 128))
TOKENS = (1, 2, 4)
SETS = 4


OPS = ("router", "topk", "softmax", "sort", "gather")
TOP_K = 8


def routing_op(op: str, hidden: int, experts: int, m: int, gen: torch.Generator, router_dtype: torch.dtype,
               device: str = "cuda") -> Callable[[int], Any]:
    """One routing-chain step on the main stream, sized by a preset's hidden size and expert count: the router
    GEMM (after its cast), or one of the latency-bound kernels that follow it (top-k and softmax over the
    [m, experts] fp32 logits, the sort of the m × top-k expert ids, the gather of m × top-k hidden rows)."""
    x = torch.randn(m, hidden, generator=gen, device=device, dtype=torch.bfloat16)
    logits = torch.randn(m, experts, generator=gen, device=device, dtype=torch.float32)
    k = min(TOP_K, experts)
    if op == "router":
        router = torch.randn(experts, hidden, generator=gen, device=device, dtype=router_dtype)
        return lambda i: F.linear(x.to(router_dtype), router)
    if op == "topk":
        return lambda i: torch.topk(logits, k, dim=-1)
    if op == "softmax":
        return lambda i: torch.softmax(logits, dim=-1)
    ids = torch.randint(0, experts, (m * k,), generator=gen, device=device)
    if op == "sort":
        return lambda i: torch.sort(ids, stable=True)
    rows = torch.randint(0, m, (m * k,), generator=gen, device=device)
    return lambda i: x.index_select(0, rows)


def steps(k: int, n: int, hidden: int, experts: int, m: int, aux: torch.cuda.Stream,
          router_dtype: torch.dtype = torch.float32, op: str = "router") -> dict[str, Callable[[int], None]]:
    """The three steps of one (shared shape, routing op and its preset's sizes, token count)."""
    gen = torch.Generator(device="cuda").manual_seed(m)
    xs = torch.randn(m, k, generator=gen, device="cuda", dtype=torch.bfloat16)
    shared = [torch.randn(n, k, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    route = routing_op(op, hidden, experts, m, gen, router_dtype)

    def gemm(i: int) -> None:
        F.linear(xs, shared[i])

    return {"S": gemm, "R": route, "S|R": forked(aux, gemm, route, aux_first=True)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.microbench.placement_probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--budget-s", type=float, default=150.0, help="skip the remaining cases after this many s")
    p.add_argument("--op", choices=OPS, default="router",
                   help="the main stream's step R (default router: the router GEMM after its cast; the others: "
                        "the latency-bound routing kernels after it, sized by each preset)")
    p.add_argument("--router-dtype", choices=("float32", "bfloat16"), default="float32",
                   help="the router GEMM's dtype (default float32, as the layer; bfloat16: the same GEMM on tensor "
                        "cores, no cast)")
    p.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS), metavar="M",
                   help=f"token counts (M of both steps; default {' '.join(map(str, TOKENS))})")
    p.add_argument("--routers", nargs="+", choices=[r[0] for r in ROUTERS], metavar="PRESET",
                   help="size the routing step as these presets only (default: all)")
    args = p.parse_args(argv)
    if min(args.tokens) < 1:
        p.error("--tokens: token counts are >= 1")
    if not torch.cuda.is_available():
        print("error: needs a CUDA/ROCm GPU", file=sys.stderr)
        return 2
    aux = torch.cuda.Stream()
    records, skipped, begun = [], [], time.monotonic()
    for s_label, k, n in SHARED:
        for r_label, hidden, experts in ROUTERS:
            if args.routers and r_label not in args.routers:
                continue
            for m in args.tokens:
                case = {"shared": s_label, "K": k, "N": n, "router": r_label, "hidden": hidden,
                        "experts": experts, "op": args.op, "router_dtype": args.router_dtype, "tokens": m}
                if time.monotonic() - begun > args.budget_s:
                    skipped.append(case)
                    continue
                made = steps(k, n, hidden, experts, m, aux, getattr(torch, args.router_dtype), args.op)
                graphs = {name: capture(step, SETS) for name, step in made.items()}
                med = {name: statistics.median(replay_us(g, SETS)) for name, g in graphs.items()}
                records.append({**case, "median_us": med, "kernels": profile_kernels(graphs)})
                serial = med["S"] + med["R"]
                print(f"{s_label:22} {r_label:17} t{m}  S {med['S']:6.1f}  R {med['R']:6.1f}  S|R {med['S|R']:6.1f}"
                      f"  overlap {100 * (1 - med['S|R'] / serial):+5.1f}%", flush=True)
                del graphs
                torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    env = run_env(torch.device("cuda"), __doc__)
    payload = {"env": env, "records": records, "skipped": skipped}
    (args.out / "placement_probe.json.gz").write_bytes(gzip.compress(json.dumps(payload).encode()))
    print(f"[placement_probe] {len(records)} cases, {len(skipped)} skipped, {time.monotonic() - begun:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
