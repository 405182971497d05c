"""Where do a router's blocks land beside a shared GEMM, and when do they start, with and without a node ahead?

Calls 38-42 found that one extra graph node on the main stream between the fork and the routing head (a
``torch.cuda._sleep`` of as little as 125 cycles) turns the layer's multi_stream loss at 2-4 tokens into a gain
where the fp32 router GEMM runs beside the shared experts' GEMM; the profiled traces cannot say why (the profiler
changes the co-run, and so did the one-warp stamps of call 37). This probe instruments the router itself: a
Triton stand-in with the real router's grid (cuBLAS's SIMT sgemm at 2 tokens: 112 blocks of 128 threads for
DeepSeek-V3, 64 for Llama-4-Maverick) streams the same fp32 weights (each block one slice, split-K) and each block
writes its SM (``%smid``) and the global timer (``%globaltimer``, ns) when it starts and ends. Per shared GEMM
shape × router, CUDA graphs over ``placement_probe.SETS`` weight sets, event-timed (µs per set):

- ``S``, ``R``: the shared GEMM alone (``F.linear``), the routing head alone (``x.float()``, then the stand-in);
- ``S|R``: forked as the layer forks them (aux branch captured first), ``S|~R``: the same with
  ``torch.cuda._sleep(SPIN_CYCLES)`` on main ahead of the routing head;
- ``R|S``: forked, the main branch (routing head) captured before the aux branch (``MoELayer(shared_first=False)``'s
  order, call 42), no spin;
- ``S|Rc``, ``S|~Rc``, ``Rc|S``: the same three with the real cuBLAS router GEMM instead of the stand-in (event
  times only): whether the spin's effect shows here at all.

For the stand-in graphs every replay's block records are read back: per graph the median over replays × sets of
the stand-in's span (first block start to last block end, µs), the distinct SMs its blocks ran on, the most blocks
one SM ran, the blocks that started more than 2 µs after the first (a second wave), and a block's median time.
``python -m calibration.microbench.dispatch_probe --out DIR`` writes ``dispatch_probe.json.gz``
(``benchmarks/dispatch_table.py`` prints it). CUDA only (``%smid`` and ``%globaltimer`` are PTX; not run on AMD
hardware, refused on ROCm).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from calibration.microbench.graph_corun import capture, forked, replay_us
from calibration.microbench.placement_probe import SETS, SHARED
from kernels_real.bench import run_env

SPIN_CYCLES = 2000  # about 1 µs at the H200's clock; any extra node did it in call 41
ROUTERS = {"deepseek_v3": (7168, 256, 112), "llama4_maverick": (5120, 128, 64)}  # hidden, experts, sgemm blocks
DEFAULT_SHARED = ("deepseek_v3@tp2", "llama4_maverick@tp4", "deepseek_v3", "deepseek_v3@tp8", "qwen2_57b_a14b")
TOKENS = 2
WARM, REPS = 3, 25
LATE_NS = 2000
RECORDED = {"R": 0, "S|R": 1, "S|~R": 2, "R|S": 3}  # the stand-in graphs whose block records are read back


def standin_kernel() -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], None]:
    """``run(x, w, partial, rec, blocks)``: ``blocks`` programs of 4 warps; program ``b`` streams slice ``b`` of the
    flattened fp32 router weight ``w`` ([E·H]) against the tokens ``x`` ([M, H] fp32), writes its partial sums to
    ``partial[b, :M]`` and ``[smid, start ns, end ns]`` to ``rec[b]``."""
    import triton
    import triton.language as tl

    @triton.jit
    def _standin(x_ptr, w_ptr, part_ptr, rec_ptr, hidden, total, chunk, M: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        t0 = tl.extra.cuda.globaltimer()
        sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [b], dtype=tl.int32, is_pure=False, pack=1)
        lo = b * chunk
        hi = tl.minimum(lo + chunk, total)
        for m in tl.static_range(M):
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for start in range(lo, hi, BLOCK):
                idx = start + tl.arange(0, BLOCK)
                keep = idx < hi
                wv = tl.load(w_ptr + idx, mask=keep, other=0.0)
                xv = tl.load(x_ptr + m * hidden + idx % hidden, mask=keep, other=0.0)
                acc += wv * xv
            tl.store(part_ptr + b * M + m, tl.sum(acc, axis=0))
        t1 = tl.extra.cuda.globaltimer()
        tl.store(rec_ptr + b * 3, sm.to(tl.int64))
        tl.store(rec_ptr + b * 3 + 1, t0)
        tl.store(rec_ptr + b * 3 + 2, t1)

    def run(x: torch.Tensor, w: torch.Tensor, partial: torch.Tensor, rec: torch.Tensor, blocks: int) -> None:
        total = w.numel()
        _standin[(blocks,)](x, w, partial, rec, x.shape[1], total, -(-total // blocks), M=x.shape[0], BLOCK=1024,
                            num_warps=4)
    return run


def block_stats(rec: torch.Tensor) -> dict[str, float]:
    """One stand-in run's records ``[blocks, 3]`` (smid, start ns, end ns) summarised."""
    sm, start, end = (rec[:, i].tolist() for i in range(3))
    first = min(start)
    per_sm = Counter(sm)
    return {"span_us": (max(end) - first) / 1e3, "sms": len(per_sm), "max_per_sm": max(per_sm.values()),
            "late": sum(1 for s in start if s - first > LATE_NS),
            "block_us": statistics.median((e - s) / 1e3 for s, e in zip(start, end, strict=True))}


def case_graphs(k: int, n: int, router: tuple[int, int, int], aux: torch.cuda.Stream,
                run: Callable[..., None]) -> tuple[dict[str, Callable[[int], None]], torch.Tensor]:
    """The steps of one (shared shape, router) at ``TOKENS`` tokens and the record buffer the stand-in writes
    (``[graph, set, block, 3]`` for the graphs ``R``, ``S|R``, ``S|~R``, ``R|S``)."""
    hidden, experts, blocks = router
    gen = torch.Generator(device="cuda").manual_seed(n)
    xs = torch.randn(TOKENS, k, generator=gen, device="cuda", dtype=torch.bfloat16)
    shared = [torch.randn(n, k, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    x = torch.randn(TOKENS, hidden, generator=gen, device="cuda", dtype=torch.bfloat16)
    gates = [torch.randn(experts, hidden, generator=gen, device="cuda", dtype=torch.float32) for _ in range(SETS)]
    partial = torch.empty(blocks, TOKENS, device="cuda", dtype=torch.float32)
    recs = torch.zeros(len(RECORDED), SETS, blocks, 3, device="cuda", dtype=torch.int64)

    def gemm(i: int) -> None:
        F.linear(xs, shared[i])

    def standin(graph: int, spin: bool) -> Callable[[int], None]:
        def step(i: int) -> None:
            if spin:
                torch.cuda._sleep(SPIN_CYCLES)
            run(x.float(), gates[i], partial, recs[graph, i], blocks)
        return step

    def cublas(spin: bool) -> Callable[[int], None]:
        def step(i: int) -> None:
            if spin:
                torch.cuda._sleep(SPIN_CYCLES)
            F.linear(x.float(), gates[i])
        return step

    return {"S": gemm, "R": standin(0, False), "S|R": forked(aux, gemm, standin(1, False), aux_first=True),
            "S|~R": forked(aux, gemm, standin(2, True), aux_first=True),
            "R|S": forked(aux, gemm, standin(3, False), aux_first=False), "Rc": cublas(False),
            "S|Rc": forked(aux, gemm, cublas(False), aux_first=True),
            "S|~Rc": forked(aux, gemm, cublas(True), aux_first=True),
            "Rc|S": forked(aux, gemm, cublas(False), aux_first=False)}, recs


def measure_case(k: int, n: int, router: tuple[int, int, int], aux: torch.cuda.Stream,
                 run: Callable[..., None]) -> dict[str, dict[str, float]]:
    """Per graph the median event-timed µs per set and, for the stand-in graphs, the median block statistics."""
    steps, recs = case_graphs(k, n, router, aux, run)
    out: dict[str, dict[str, float]] = {}
    for name, step in steps.items():
        graph = capture(step, SETS)
        entry: dict[str, float] = {"us": statistics.median(replay_us(graph, SETS))}
        if name in RECORDED:
            samples: dict[str, list[float]] = {}
            for _ in range(REPS):
                graph.replay()
                torch.cuda.synchronize()
                for s in range(SETS):
                    for key, value in block_stats(recs[RECORDED[name], s].cpu()).items():
                        samples.setdefault(key, []).append(value)
            entry |= {key: statistics.median(values) for key, values in samples.items()}
        out[name] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.microbench.dispatch_probe",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for dispatch_probe.json.gz")
    p.add_argument("--shared", nargs="+", default=list(DEFAULT_SHARED),
                   help="shared GEMM shapes by label (placement_probe.SHARED; default: %(default)s)")
    p.add_argument("--routers", nargs="+", default=list(ROUTERS), help="routers (default: %(default)s)")
    args = p.parse_args(argv)
    shapes = {label: (k, n) for label, k, n in SHARED}
    unknown = [s for s in args.shared if s not in shapes] + [r for r in args.routers if r not in ROUTERS]
    if unknown or not torch.cuda.is_available() or torch.version.hip:
        why = f"unknown shape or router {unknown[0]!r}" if unknown else "needs a CUDA GPU (PTX timers; not ROCm)"
        print(f"error: {why}", file=sys.stderr)
        return 2
    run = standin_kernel()
    aux = torch.cuda.Stream()
    records = []
    for label in args.shared:
        for router in args.routers:
            k, n = shapes[label]
            graphs = measure_case(k, n, ROUTERS[router], aux, run)
            records.append({"shared": label, "K": k, "N": n, "router": router, "tokens": TOKENS,
                            "blocks": ROUTERS[router][2], "graphs": graphs})
            torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    how = (f"CUDA graphs over {SETS} sets, {WARM} warm-up and {REPS} event-timed replays (µs per set, median); the "
           f"stand-in's block records of {REPS} more replays read back (medians over replays × sets); spin "
           f"torch.cuda._sleep({SPIN_CYCLES})")
    with gzip.open(args.out / "dispatch_probe.json.gz", "wt") as f:
        json.dump({"env": run_env(torch.device("cuda"), how), "records": records}, f)
    print(f"dispatch_probe: {len(records)} cases written to {args.out / 'dispatch_probe.json.gz'} "
          f"(python benchmarks/dispatch_table.py {args.out} for the table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
