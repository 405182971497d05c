"""The TP variant: every expert (routed and shared) sharded along its intermediate width, all-reduce after.

As vLLM's TP MoE: the gate and the routing are replicated (every rank holds the same tokens), rank ``r``
holds rows ``r·I/tp .. (r+1)·I/tp`` of every expert's gate and up projections and the matching columns of
its down projection, so each rank's layer output is a partial sum; one all-reduce (on the current stream,
after the shared experts have joined main) completes it. The rank's local layer is kernels_real's
``MoELayer`` on the narrowed config, so the three strategies schedule exactly as on one GPU.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist
from torch.profiler import record_function

from kernels_real.config import MoEConfig
from kernels_real.distributed.parallel import Dist, shard
from kernels_real.layer import MoELayer, MoEWeights


def tp_config(cfg: MoEConfig, tp: int) -> MoEConfig:
    """The per-rank config: routed and shared intermediates divided by ``tp`` (ConfigError if they do not)."""
    shard(cfg.moe_intermediate, 0, tp, f"{cfg.name}: moe_intermediate")
    if cfg.has_shared:
        shard(cfg.shared_intermediate, 0, tp, f"{cfg.name}: shared_intermediate")
    return dataclasses.replace(cfg, name=f"{cfg.name}-tp{tp}", moe_intermediate=cfg.moe_intermediate // tp,
                               shared_intermediate=cfg.shared_intermediate // tp)


def _rows(w13: torch.Tensor, inter: int, part: slice) -> torch.Tensor:
    """Gate rows ``part`` and up rows ``inter + part`` of a fused gate_up weight (dim -2)."""
    gate = w13[..., part, :]
    up = w13[..., inter + part.start:inter + part.stop, :]
    return torch.cat([gate, up], dim=-2).contiguous()


def shard_weights_tp(cfg: MoEConfig, w: MoEWeights, rank: int, tp: int) -> MoEWeights:
    """Rank ``rank``'s slice of the full weight set ``w`` (fused shared chunks sliced like routed experts)."""
    part = shard(cfg.moe_intermediate, rank, tp, f"{cfg.name}: moe_intermediate")
    shared_w13 = shared_w2 = None
    if cfg.has_shared:
        sp = shard(cfg.shared_total, rank, tp, f"{cfg.name}: shared intermediate")  # one MLP of that width
        shared_w13 = _rows(w.shared_w13, cfg.shared_total, sp)
        shared_w2 = w.shared_w2[:, sp].contiguous()
    return MoEWeights(gate=w.gate, bias=w.bias, w13=_rows(w.w13, cfg.moe_intermediate, part),
                      w2=w.w2[..., part].contiguous(), shared_w13=shared_w13, shared_w2=shared_w2,
                      shared_gate=w.shared_gate)


def random_tp_weights(cfg: MoEConfig, d: Dist, seed: int) -> MoEWeights:
    """This rank's shard of the weight set ``MoEWeights.random(cfg, seed=seed)`` (the same on every rank).

    The full set is built on the rank's device first and freed after slicing: peak memory is the full set
    plus the shard (DeepSeek-V3 in bf16: ~44 GB + 1/tp of it, inside an H200's 141 GB)."""
    return shard_weights_tp(cfg, MoEWeights.random(cfg, d.device, seed=seed), d.rank, d.world)


class TPMoELayer:
    """One rank of the TP MoE layer; ``__call__(x, w_shard, strategy)`` returns the full (reduced) output."""

    def __init__(self, cfg: MoEConfig, d: Dist, backend: str | None = None) -> None:
        self.cfg, self.dist = cfg, d
        self.local_cfg = tp_config(cfg, d.world)
        self.local = MoELayer(self.local_cfg, d.device, backend)
        self.backend = self.local.backend

    def __call__(self, x: torch.Tensor, w: MoEWeights, strategy: str = "sequential", ubatch: int = 0
                 ) -> torch.Tensor:
        """The layer output for ``x`` ([tokens, hidden], the same on every rank)."""
        partial = self.local(x, w, strategy, ubatch)
        if self.dist.world > 1:
            with record_function("moe.all_reduce"):
                dist.all_reduce(partial)
        return partial
