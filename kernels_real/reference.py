"""A float64 reference of the layer, written token by token and independently of the batched code."""

from __future__ import annotations

import math

import torch

from kernels_real.config import MoEConfig
from kernels_real.layer import MoEWeights


def _mlp(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    inter = w13.shape[0] // 2
    g, u = w13[:inter] @ x, w13[inter:] @ x
    return w2 @ (g / (1.0 + torch.exp(-g)) * u)


def _choose(logits: list[float], cfg: MoEConfig, bias: list[float] | None) -> list[tuple[int, float]]:
    """(expert, weight) pairs for one token, by the router's definition."""
    e = len(logits)
    if cfg.router == "softmax":
        top = max(logits)
        exp = [math.exp(v - top) for v in logits]
        total = sum(exp)
        probs = [v / total for v in exp]
        ids = sorted(range(e), key=lambda j: -probs[j])[: cfg.top_k]
        chosen = [(j, probs[j]) for j in ids]
    elif cfg.router == "topk_sigmoid":
        ids = sorted(range(e), key=lambda j: -logits[j])[: cfg.top_k]
        chosen = [(j, 1.0 / (1.0 + math.exp(-logits[j]))) for j in ids]
    else:
        assert bias is not None
        scores = [1.0 / (1.0 + math.exp(-v)) for v in logits]
        choice = [s + b for s, b in zip(scores, bias, strict=True)]
        size = e // cfg.n_group
        group_score = [sum(sorted(choice[g * size:(g + 1) * size])[-2:]) for g in range(cfg.n_group)]
        groups = sorted(range(cfg.n_group), key=lambda g: -group_score[g])[: cfg.topk_group]
        allowed = [j for j in range(e) if j // size in groups]
        ids = sorted(allowed, key=lambda j: -choice[j])[: cfg.top_k]
        chosen = [(j, scores[j]) for j in ids]
    if cfg.renormalize:
        total = sum(wt for _, wt in chosen)
        chosen = [(j, wt / total) for j, wt in chosen]
    return [(j, wt * cfg.routed_scaling_factor) for j, wt in chosen]


def reference_forward(cfg: MoEConfig, x: torch.Tensor, w: MoEWeights) -> torch.Tensor:
    """The layer output in float64 (routing decided in float64 too)."""
    x64 = x.double().cpu()
    gate = w.gate.double().cpu()
    bias = w.bias.double().cpu().tolist() if w.bias is not None else None
    w13, w2 = w.w13.double().cpu(), w.w2.double().cpu()
    shared = None
    if cfg.has_shared:
        shared = (w.shared_w13.double().cpu(), w.shared_w2.double().cpu())
    sgate = w.shared_gate.double().cpu()[0] if w.shared_gate is not None else None
    out = torch.zeros_like(x64)
    for t in range(x64.shape[0]):
        xt = x64[t]
        for j, wt in _choose((gate @ xt).tolist(), cfg, bias):
            out[t] += wt * _mlp(xt, w13[j], w2[j])
        if shared is not None:
            y = _mlp(xt, *shared)
            out[t] += y if sgate is None else y * torch.sigmoid(sgate @ xt)
    return out
