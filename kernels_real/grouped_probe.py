"""Why does the microbench time a grouped GEMM slower than the layer runs it? The same call on other weights.

``python -m kernels_real.grouped_probe --out DIR [--presets ...] [--tokens 1 2 4] [--reps 40]``

Llama-4-Scout's gate_up grouped GEMM at 1 token ran 66 µs in the layer's trace and 80-86 µs in the microbench
(profiler and graph chain alike), with the same kernel, grid and shape, and in either weight layout (calls 45-46).
What is left is the data: the layer's weights are ``randn × hidden^-½`` (``MoEWeights.random``), the microbench's
plain ``randn``. Per preset × tokens this routes the bench's input through the layer's router and times the layer's
own gate_up grouped GEMM call (``torch._grouped_mm`` of the routed rows, the layer's ``[E, N, K]`` experts passed
transposed) on weights that differ only in their values: the layer's (``layer``), a fresh draw of the same
distribution (``scaled``), plain ``randn`` (``unscaled``), and plain ``randn`` held ``[E, K, N]`` as the microbench
held it until 2026-12-04 (``microbench``). Each timing: a CUDA graph of one call, the L2 flushed (a 256 MiB write)
before each replay, CUDA events around the replay; variants interleaved rep by rep; medians.

Writes ``DIR/grouped_probe.json`` (per preset × tokens × variant the median µs and the experts hit) and prints a
table. GPU only (CUDA; the calls are HIP-portable, ROCm was not run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernels_real.bench import bench_input, run_env, weight_seed
from kernels_real.config import MoEConfig, get_preset, preset_error
from kernels_real.grouped_gemm import Groups, make_groups
from kernels_real.layer import MoELayer, MoEWeights

VARIANTS = ("layer", "scaled", "unscaled", "microbench")
FLUSH_BYTES = 256 << 20


def variant_weights(w13: torch.Tensor, hidden: int) -> dict[str, torch.Tensor]:
    """The gate_up experts ``[E, 2I, H]`` as each variant passes them to ``torch._grouped_mm`` (``[E, K, N]``)."""
    scaled = torch.randn_like(w13).mul_(hidden**-0.5)
    unscaled = torch.randn_like(w13)
    legacy = torch.randn(w13.shape[0], w13.shape[2], w13.shape[1], dtype=w13.dtype, device=w13.device)
    return {"layer": w13.transpose(1, 2), "scaled": scaled.transpose(1, 2), "unscaled": unscaled.transpose(1, 2),
            "microbench": legacy}


@dataclass(frozen=True)
class RoutedCall:
    """The layer's gate_up grouped GEMM call at one point: the bench's input routed by the layer's router."""

    cfg: MoEConfig
    x: torch.Tensor  # the bench's input [T, H]
    src_rows: torch.Tensor  # the input row of each routed row, in expert order
    rows: torch.Tensor  # the routed rows [T * top_k, H]
    groups: Groups
    w13: torch.Tensor  # the routed experts' gate_up weights [E, 2I, H] (weight set 0)

    @property
    def experts_hit(self) -> int:
        return int((self.groups.counts > 0).sum())


def routed_call(name: str, tokens: int, device: torch.device) -> RoutedCall:
    """The gate_up grouped GEMM call of preset ``name`` at ``tokens`` tokens, on weight set 0, as the layer makes it."""
    cfg = get_preset(name)
    layer = MoELayer(cfg, device)
    w = MoEWeights.random(cfg, device, seed=weight_seed(0))
    x = bench_input(cfg, tokens, device, layer.dtype)
    ids, _ = layer._gate(x, w)
    order, groups = make_groups(ids.reshape(-1), cfg.n_experts, capacity=tokens)
    src_rows = order // cfg.top_k
    return RoutedCall(cfg, x, src_rows, x.index_select(0, src_rows), groups, w.w13[:cfg.n_experts])


def each_point(presets: list[str], tokens: list[int], point: Callable[[str, int], dict[str, object]]
               ) -> list[dict[str, object]]:
    """``point(preset, tokens)`` for every preset × token count, the allocator's cache emptied after each."""
    records = []
    for name in presets:
        for t in tokens:
            records.append(point(name, t))
            torch.cuda.empty_cache()
    return records


def time_point(name: str, tokens: int, reps: int, device: torch.device) -> dict[str, object]:
    """Median µs of the gate_up grouped GEMM per variant at ``tokens`` tokens of preset ``name``."""
    call = routed_call(name, tokens, device)
    cfg, rows, groups, hit = call.cfg, call.rows, call.groups, call.experts_hit
    weights = variant_weights(call.w13, cfg.hidden)
    del call
    graphs = {}
    for variant, b in weights.items():
        torch._grouped_mm(rows, b, offs=groups.offsets)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            torch._grouped_mm(rows, b, offs=groups.offsets)
        graphs[variant] = graph
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
    times: dict[str, list[float]] = {v: [] for v in graphs}
    for rep in range(reps + 3):
        for variant, graph in graphs.items():
            flush.fill_(rep & 0xFF)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            if rep >= 3:
                times[variant].append(start.elapsed_time(end) * 1e3)
    return {"preset": name, "tokens": tokens, "experts_hit": hit, "K": cfg.hidden, "N": 2 * cfg.moe_intermediate,
            "median_us": {v: statistics.median(t) for v, t in times.items()}, "reps": reps}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.grouped_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for grouped_probe.json")
    p.add_argument("--presets", nargs="+", default=["llama4_scout", "qwen2_57b_a14b", "deepseek_v3"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--reps", type=int, default=40, help="timed replays per variant (default: %(default)s)")
    args = p.parse_args(argv)
    bad = preset_error(args.presets) or ("--reps and --tokens must be >= 1"
                                         if args.reps < 1 or min(args.tokens) < 1 else None)
    if bad or not torch.cuda.is_available():
        print(f"error: {bad or 'the grouped probe needs a CUDA (or ROCm) GPU'}", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    records = each_point(args.presets, args.tokens, lambda name, t: time_point(name, t, args.reps, device))
    args.out.mkdir(parents=True, exist_ok=True)
    how = ("gate_up grouped GEMM of the layer's routed rows, one call per CUDA graph, L2 flushed before each replay, "
           "CUDA events around the replay, variants interleaved, medians")
    (args.out / "grouped_probe.json").write_text(json.dumps({"env": run_env(device, how), "records": records},
                                                            indent=1) + "\n")
    print("| preset | tokens | experts hit | " + " | ".join(f"{v} µs" for v in VARIANTS) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in VARIANTS) + " |")
    for r in records:
        print(f"| {r['preset']} | {r['tokens']} | {r['experts_hit']} | "
              + " | ".join(f"{r['median_us'][v]:.1f}" for v in VARIANTS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
