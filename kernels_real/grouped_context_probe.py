"""Does what runs just before a grouped GEMM set its time? The layer's call in seven contexts.

``python -m kernels_real.grouped_context_probe --out DIR [--presets ...] [--tokens 1 2] [--steps 6] [--replays 5]``

The same ``torch._grouped_mm`` call on the same weights runs about 80 µs alone in a CUDA graph and in the
microbench's chains, and about 65 µs inside the layer's replayed graph (Llama-4-Scout's gate_up at 1 token on the
H200; ``calibration/measurements/h200/2026-12-04/README.md``, call 47). Neither the weights' values nor their layout
moved it. This probe times the call, on the layer's own routed rows and experts, after each of:

- ``chain``: the previous step's grouped GEMM (the microbench's chain);
- ``flush``: a 256 MiB write (the grouped probe of call 47);
- ``x_warm``: an in-place add of zero to its input rows (the rows in the L2, nothing else);
- ``gather``: the layer's own ``index_select`` that makes its input rows (as the layer runs it);
- ``spin``: a ~20 µs spin kernel (an idle memory system, the rows cold);
- ``dense``: a dense GEMM streaming as many weight bytes (a busy memory system, the rows cold);
- ``other_expert``: the same grouped GEMM on the same weights with its rows routed to other experts (the counts
  rolled by one expert), as the microbench's chain alternates routings to keep the weights out of the L2.

Each context is a CUDA graph of ``steps`` steps (the context's kernel, then the grouped GEMM), replayed under the
profiler; a grouped GEMM's time is its kernel's duration in the trace (CUPTI), median over steps and replays.
Run on an H100 in session 30: no context but the flush moves the call; the address of its input rows does
(calibration/VALIDATION.md, "The grouped GEMM in and out of the layer").

Writes ``DIR/grouped_context_probe.json`` (per preset × tokens × context the kernel durations and their median, the
experts hit) and prints a table. GPU only (CUDA; the calls are HIP-portable, ROCm was not run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from kernels_real.bench import run_env
from kernels_real.config import get_preset, preset_error
from kernels_real.grouped_probe import FLUSH_BYTES, each_point, routed_call
from kernels_real.profiling import chrome_trace

CONTEXTS = ("chain", "flush", "x_warm", "gather", "spin", "dense", "other_expert")
SPIN_CYCLES = 40_000  # about 20 µs at the H100's and H200's ~2 GHz
GROUPED_KERNEL = "GroupProblemShape"  # in the mangled name of every CUTLASS grouped GEMM torch._grouped_mm runs


def grouped_durations(trace: dict[str, object]) -> list[float]:
    """µs of every grouped GEMM kernel in a Chrome trace, in trace order."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel"
               and GROUPED_KERNEL in str(e.get("name", ""))]
    return [float(e["dur"]) for e in sorted(kernels, key=lambda e: float(e["ts"]))]


def timed_durations(context: str, durations: list[float], steps: int) -> list[float]:
    """The layer call's grouped GEMM durations among a context graph's replays' (trace order): in ``chain`` every
    step's but each replay's first (it follows no grouped GEMM); in ``other_expert`` every second (the first of
    each pair is the other routing's); else all."""
    if context == "chain":
        return [d for i, d in enumerate(durations) if i % steps]
    if context == "other_expert":
        return durations[1::2]
    return durations


def context_steps(name: str, tokens: int, device: torch.device) -> tuple[dict[str, Callable[[], None]], int]:
    """One step per context (its kernel, then the layer's gate_up grouped GEMM); the experts hit."""
    call = routed_call(name, tokens, device)
    x, src_rows, rows, groups = call.x, call.src_rows, call.rows, call.groups
    experts = call.w13.transpose(1, 2)
    hit = call.experts_hit
    dtype = rows.dtype
    moved = hit * experts.shape[1] * experts.shape[2]  # weight elements the grouped GEMM streams
    dense_w = torch.randn(experts.shape[1], max(1, moved // experts.shape[1]), device=device, dtype=dtype)
    dense_x = torch.randn(tokens, experts.shape[1], device=device, dtype=dtype)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)

    def gemm() -> None:
        torch._grouped_mm(rows, experts, offs=groups.offsets)

    def gathered() -> None:
        torch.index_select(x, 0, src_rows, out=rows)
        gemm()

    other_offsets = torch.roll(groups.counts, 1).cumsum(0).to(groups.offsets.dtype)
    other_rows = rows.clone()

    steps = {
        "chain": gemm,
        "flush": lambda: (flush.fill_(1), gemm()),
        "x_warm": lambda: (rows.add_(0), gemm()),
        "gather": gathered,
        "spin": lambda: (torch.cuda._sleep(SPIN_CYCLES), gemm()),
        "dense": lambda: (torch.mm(dense_x, dense_w), gemm()),
        "other_expert": lambda: (torch._grouped_mm(other_rows, experts, offs=other_offsets), gemm()),
    }
    return steps, hit


def time_point(name: str, tokens: int, steps: int, replays: int, device: torch.device) -> dict[str, object]:
    """Grouped GEMM kernel µs per context at ``tokens`` tokens of preset ``name``."""
    step_fns, hit = context_steps(name, tokens, device)
    durations: dict[str, list[float]] = {}
    for context, step in step_fns.items():
        step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(steps):
                step()
        for _ in range(3):
            graph.replay()

        def replay(graph: torch.cuda.CUDAGraph = graph) -> None:
            for _ in range(replays):
                graph.replay()

        trace = json.loads(chrome_trace(replay, gpu=True))
        durations[context] = timed_durations(context, grouped_durations(trace), steps)
        del graph
    cfg = get_preset(name)
    return {"preset": name, "tokens": tokens, "experts_hit": hit, "K": cfg.hidden, "N": 2 * cfg.moe_intermediate,
            "kernel_us": durations, "median_us": {c: statistics.median(d) for c, d in durations.items() if d}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.grouped_context_probe",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for grouped_context_probe.json")
    p.add_argument("--presets", nargs="+", default=["llama4_scout", "qwen2_57b_a14b", "deepseek_v3"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 2])
    p.add_argument("--steps", type=int, default=6, help="steps per graph (default: %(default)s)")
    p.add_argument("--replays", type=int, default=5, help="profiled replays per graph (default: %(default)s)")
    args = p.parse_args(argv)
    bad = preset_error(args.presets) or ("--steps must be >= 2, --replays and --tokens >= 1"
                                         if args.steps < 2 or args.replays < 1 or min(args.tokens) < 1 else None)
    if bad or not torch.cuda.is_available():
        print(f"error: {bad or 'the grouped context probe needs a CUDA (or ROCm) GPU'}", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    records = each_point(args.presets, args.tokens,
                         lambda name, t: time_point(name, t, args.steps, args.replays, device))
    args.out.mkdir(parents=True, exist_ok=True)
    how = (f"gate_up grouped GEMM of the layer's routed rows after each context's kernel, CUDA graphs of {args.steps} "
           f"steps, {args.replays} profiled replays after 3 warm-ups, kernel durations from the trace (CUPTI), medians")
    (args.out / "grouped_context_probe.json").write_text(
        json.dumps({"env": run_env(device, how), "records": records}, indent=1) + "\n")
    print("| preset | tokens | experts hit | " + " | ".join(f"{c} µs" for c in CONTEXTS) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in CONTEXTS) + " |")
    for r in records:
        med = r["median_us"]
        print(f"| {r['preset']} | {r['tokens']} | {r['experts_hit']} | "
              + " | ".join(f"{med[c]:.1f}" if c in med else "-" for c in CONTEXTS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
