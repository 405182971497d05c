"""Rank variants of a MoE preset: the compute one GPU does for one rank of tensor or expert parallelism.

A name ``PRESET@tpN`` is one rank of TP N: every routed expert and the shared experts keep their count and
hidden size, their intermediate size is split N ways (the column/row-parallel split vLLM uses). ``PRESET@epN``
is one rank of DP attention + EP N: the rank holds ``n_experts / N`` routed experts and receives, per step,
its own tokens' share of the assignments from every rank (the same ``tokens × top_k`` assignments in all,
spread over its local experts), and computes the replicated shared experts for its own tokens; its router
scores only the local experts (a GEMM ``n_experts / N`` wide instead of all: a small under-count). The
collective (all-reduce after TP, dispatch / combine around EP) is not part of the variant: it is the
compute of a rank, the regime of the seeds' TP8 vs DP comparison without the link.

Torch-free and shared by ``kernels_real.config`` and ``simulator.workloads.presets``: both sides apply the
same field changes to their own preset records.
"""

from __future__ import annotations

import re
from typing import Any

_SUFFIX = re.compile(r"^(?P<base>.+)@(?P<kind>tp|ep)(?P<n>\d+)$")
RANK_KINDS = ("tp", "ep")


def split_rank_name(name: str) -> tuple[str, str | None, int]:
    """``("deepseek_v3", "tp", 8)`` for ``deepseek_v3@tp8``; ``(name, None, 1)`` for a plain preset name."""
    m = _SUFFIX.match(name)
    if m is None:
        return name, None, 1
    return m["base"], m["kind"], int(m["n"])


def rank_fields(fields: dict[str, Any], kind: str, n: int) -> dict[str, Any]:
    """The preset fields of one rank of ``kind`` (``tp`` / ``ep``) over ``n`` GPUs.

    Raises ValueError with one line when the split does not divide the model.
    """
    name = fields["name"]
    if n < 1:
        raise ValueError(f"{name}: a rank variant needs n >= 1, got {n}")
    out = dict(fields, name=f"{name}@{kind}{n}")
    if kind == "tp":
        for key in ("moe_intermediate", "shared_intermediate"):
            if fields.get(key, 0) % n:
                raise ValueError(f"{name}: {key}={fields[key]} is not divisible by tp={n}")
            out[key] = fields.get(key, 0) // n
        return out
    if kind == "ep":
        experts = fields["n_experts"]
        if experts % n:
            raise ValueError(f"{name}: n_experts={experts} is not divisible by ep={n}")
        local = experts // n
        out["n_experts"] = local
        out["top_k"] = min(fields["top_k"], local)
        if fields.get("router") == "grouped_sigmoid":
            groups = max(1, min(fields.get("n_group", 1), local // 2))
            while local % groups:
                groups -= 1
            out["n_group"] = groups
            out["topk_group"] = min(fields.get("topk_group", 1), groups)
            per_group = local // groups
            out["top_k"] = min(out["top_k"], out["topk_group"] * per_group)
        return out
    raise ValueError(f"{name}: unknown rank kind {kind!r}; known: {', '.join(RANK_KINDS)}")
