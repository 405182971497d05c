"""Router top-k selection, batched and sync-free (CUDA-graph capturable)."""

from __future__ import annotations

import torch

from kernels_real.config import MoEConfig


def route(
    logits: torch.Tensor, cfg: MoEConfig, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Expert ids (int64, [T, k]) and float32 weights ([T, k]) from float32 router logits ([T, E])."""
    if cfg.router == "softmax":
        probs = torch.softmax(logits, dim=-1)
        weights, ids = torch.topk(probs, cfg.top_k, dim=-1)
    elif cfg.router == "topk_sigmoid":
        top, ids = torch.topk(logits, cfg.top_k, dim=-1)
        weights = torch.sigmoid(top)
    else:
        weights, ids = _grouped_sigmoid(logits, cfg, bias)
    if cfg.renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    if cfg.routed_scaling_factor != 1.0:
        weights = weights * cfg.routed_scaling_factor
    return ids, weights


def _grouped_sigmoid(
    logits: torch.Tensor, cfg: MoEConfig, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3 ``noaux_tc``: choose on sigmoid + bias within the best groups, weigh by the sigmoid."""
    if bias is None:
        raise ValueError("grouped_sigmoid routing needs the correction bias")
    scores = torch.sigmoid(logits)
    choice = scores + bias
    tokens = logits.shape[0]
    grouped = choice.view(tokens, cfg.n_group, -1)
    group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
    group_ids = group_scores.topk(cfg.topk_group, dim=-1).indices
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_ids, 1.0)
    expert_mask = group_mask.unsqueeze(-1).expand_as(grouped).reshape(tokens, -1)
    masked = choice.masked_fill(expert_mask == 0, float("-inf"))
    ids = masked.topk(cfg.top_k, dim=-1).indices
    return scores.gather(1, ids), ids
