"""Numerical check of the TP and DP+EP variants against the single-GPU layer, on every rank.

``torchrun --nproc-per-node N -m kernels_real.distributed.check [--device cuda|cpu]``: tiny configs of the
presets (``MoEConfig.scaled_down``), random weights and inputs; each rank runs the TP variant (the same
tokens everywhere), the EP variant with both dispatch forms (its own tokens, a different count per rank)
and, on GPUs, a CUDA/HIP-graph capture of the padded EP and the TP layer (replay == eager). The reference
is kernels_real's single-GPU ``MoELayer`` with the full weights on the rank's own tokens. Prints one line per
case on rank 0; exit code 1 if any relative error exceeds the tolerance. ``run_cases`` is also what the CPU
tests spawn (gloo), which compare its saved outputs themselves.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from kernels_real.config import MoEConfig, get_preset
from kernels_real.distributed.ep_layer import EPMoELayer, shard_weights_ep
from kernels_real.distributed.parallel import Dist, init, shutdown
from kernels_real.distributed.tp_layer import TPMoELayer, shard_weights_tp
from kernels_real.layer import MoELayer, MoEWeights

CHECK_PRESETS = ("deepseek_v3", "qwen2_57b_a14b", "deepseek_v2_lite", "qwen3_30b_a3b")
TP_TOKENS = 6
WEIGHT_SEED = 1
TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


@dataclass(frozen=True)
class Case:
    """One run of a variant: ``kind`` tp or ep; ``dispatch``/``capacity`` for ep."""

    preset: str
    kind: str
    strategy: str
    dispatch: str | None = None
    capacity: int | None = None

    @property
    def name(self) -> str:
        extra = f"_{self.dispatch}" + (f"_cap{self.capacity}" if self.capacity else "") if self.dispatch else ""
        return f"{self.preset}_{self.kind}_{self.strategy}{extra}"


def tiny_config(preset: str, dtype: str) -> MoEConfig:
    """The preset scaled down for a quick check (hidden 128, intermediate 64, at most 16 experts)."""
    return dataclasses.replace(get_preset(preset).scaled_down(), dtype=dtype)


def ep_tokens(rank: int) -> int:
    """A different token count per rank (DP ranks carry different batches)."""
    return 3 + 2 * rank


def max_ep_tokens(world: int) -> int:
    return ep_tokens(world - 1)


def case_input(cfg: MoEConfig, case: Case, rank: int, device: torch.device) -> torch.Tensor:
    """The case's input on ``rank``: TP ranks share one input, EP ranks each have their own (never zeros)."""
    tokens, seed = (TP_TOKENS, 11) if case.kind == "tp" else (ep_tokens(rank), 20 + rank)
    x = torch.randn(tokens, cfg.hidden, generator=torch.Generator().manual_seed(seed))
    return x.to(device=device, dtype=getattr(torch, cfg.dtype))


def cases(dtype: str) -> list[Case]:
    """Every applicable strategy per preset, TP and EP (both dispatch forms), plus a dropping EP case."""
    out = []
    for preset in CHECK_PRESETS:
        cfg = tiny_config(preset, dtype)
        for strategy in ("sequential", "multi_stream", "fused_shared"):
            if cfg.applicable(strategy) is None:
                out.append(Case(preset, "tp", strategy))
                if strategy != "fused_shared":
                    out += [Case(preset, "ep", strategy, "exact"), Case(preset, "ep", strategy, "padded")]
    out.append(Case("deepseek_v3", "ep", "sequential", "padded", capacity=1))
    return out


def variant(cfg: MoEConfig, case: Case, d: Dist, w: MoEWeights) -> tuple[TPMoELayer | EPMoELayer, MoEWeights]:
    """The layer of ``case`` on this rank and its weight shard."""
    if case.kind == "tp":
        return TPMoELayer(cfg, d), shard_weights_tp(cfg, w, d.rank, d.world)
    layer = EPMoELayer(cfg, d, max_tokens=max_ep_tokens(d.world), dispatch=case.dispatch or "padded",
                       capacity=case.capacity)
    return layer, shard_weights_ep(cfg, w, d.rank, d.world)


def run_cases(d: Dist, dtype: str) -> dict[str, dict[str, object]]:
    """Each case's output on this rank (and ``dropped``: rows the padded dispatch dropped, else None)."""
    results: dict[str, dict[str, object]] = {}
    for case in cases(dtype):
        cfg = tiny_config(case.preset, dtype)
        w = MoEWeights.random(cfg, d.device, seed=WEIGHT_SEED)
        layer, shard_w = variant(cfg, case, d, w)
        y = layer(case_input(cfg, case, d.rank, d.device), shard_w, case.strategy)
        dropped = getattr(layer, "last_dropped", None)
        results[case.name] = {"out": y.cpu(), "dropped": None if dropped is None else int(dropped)}
    return results


def graph_replay_error(cfg: MoEConfig, case: Case, d: Dist) -> float:
    """Relative difference between a graph replay and an eager call of the case (GPU only)."""
    w = MoEWeights.random(cfg, d.device, seed=WEIGHT_SEED)
    layer, shard_w = variant(cfg, case, d, w)
    x = case_input(cfg, case, d.rank, d.device)
    eager = layer(x, shard_w, case.strategy)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer(x, shard_w, case.strategy)
    graph.replay()
    torch.cuda.synchronize()
    return ((out.double() - eager.double()).norm() / eager.double().norm()).item()


def _rel(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.double() - ref.double()).norm() / ref.double().norm()).item()


def check(d: Dist, dtype: str) -> list[tuple[str, float, float]]:
    """(case, relative error vs the single-GPU layer, tolerance) for every case, worst over ranks."""
    rows = []
    results = run_cases(d, dtype)
    for case in cases(dtype):
        cfg = tiny_config(case.preset, dtype)
        w = MoEWeights.random(cfg, d.device, seed=WEIGHT_SEED)
        ref = MoELayer(cfg, d.device)(case_input(cfg, case, d.rank, d.device), w, "sequential").cpu()
        err = _rel(results[case.name]["out"], ref)
        tol = TOLERANCE[dtype] if not case.capacity else float("inf")  # a dropping case differs by design
        rows.append((case.name, err, tol))
    if d.on_gpu:
        for case in cases(dtype):
            if (case.kind == "tp" or case.dispatch == "padded") and not case.capacity:
                err = graph_replay_error(tiny_config(case.preset, dtype), case, d)
                rows.append((f"{case.name}_graph_replay", err, TOLERANCE[dtype]))
    worst = torch.tensor([e for _, e, _ in rows], dtype=torch.float64, device=d.device)
    if d.world > 1:
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return [(name, e, tol) for (name, _, tol), e in zip(rows, worst.tolist(), strict=True)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m kernels_real.distributed.check",
                                description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if visible (NCCL), else cpu (gloo)")
    args = p.parse_args(argv)
    d = init(args.device)
    dtype = "bfloat16" if d.on_gpu else "float32"
    try:
        rows = check(d, dtype)
    finally:
        shutdown()
    failed = [r for r in rows if not r[1] <= r[2]]
    if d.rank == 0:
        for name, err, tol in rows:
            print(f"{name}: rel error {err:.2e} (tolerance {tol:g}) {'FAIL' if (name, err, tol) in failed else 'ok'}")
        print(f"[check] world {d.world}, backend {d.backend}, {dtype}: {len(rows) - len(failed)}/{len(rows)} ok; "
              f"reference: kernels_real.layer.MoELayer (one device, full weights), NCCL_NVLS_ENABLE="
              f"{os.environ.get('NCCL_NVLS_ENABLE')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
