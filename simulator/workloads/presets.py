"""MoE model dimensions of the kernels_real presets (pure data; from each model's published config.json).

Field names follow ``kernels_real.config.MoEConfig`` so the two stay comparable (a test checks that they
agree); ``layers`` / ``moe_layers`` / ``source`` are extra, for decode-step scenarios.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from simulator.errors import InputError
from simulator.workloads.ranks import rank_fields, split_rank_name

RouterKind = Literal["softmax", "grouped_sigmoid", "topk_sigmoid"]
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class MoEDims:
    """One MoE layer's shape and routing. The ``n_shared`` shared experts of ``shared_intermediate`` each are
    one MLP of width ``shared_total``; ``shared_gate``: Qwen2's per-token sigmoid gate on the shared output."""

    name: str
    hidden: int
    moe_intermediate: int
    n_experts: int
    top_k: int
    shared_intermediate: int = 0
    n_shared: int = 0
    router: RouterKind = "softmax"
    n_group: int = 1
    topk_group: int = 1
    renormalize: bool = True
    routed_scaling_factor: float = 1.0
    shared_gate: bool = False
    dtype: str = "bfloat16"
    layers: int = 1
    moe_layers: int = 1
    source: str = ""

    @property
    def has_shared(self) -> bool:
        return self.n_shared > 0 and self.shared_intermediate > 0

    @property
    def shared_total(self) -> int:
        return self.n_shared * self.shared_intermediate

    @property
    def fused_shared_chunks(self) -> int:
        """Always-selected pseudo-experts the shared MLP becomes under ``fused_shared`` (0: not possible)."""
        if not self.has_shared or self.shared_total % self.moe_intermediate:
            return 0
        return self.shared_total // self.moe_intermediate

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]


PRESETS: dict[str, MoEDims] = {d.name: d for d in (
    MoEDims("deepseek_v3", 7168, 2048, 256, 8, 2048, 1, router="grouped_sigmoid", n_group=8, topk_group=4,
            routed_scaling_factor=2.5, layers=61, moe_layers=58,
            source="deepseek-ai/DeepSeek-V3 config.json (first_k_dense_replace=3)"),
    MoEDims("kimi_k2", 7168, 2048, 384, 8, 2048, 1, router="grouped_sigmoid", n_group=1, topk_group=1,
            routed_scaling_factor=2.827, layers=61, moe_layers=60,
            source="moonshotai/Kimi-K2-Instruct config.json (first_k_dense_replace=1)"),
    MoEDims("qwen2_57b_a14b", 3584, 2560, 64, 8, 20480, 1, renormalize=False, shared_gate=True,
            layers=28, moe_layers=28,
            source="Qwen/Qwen2-57B-A14B config.json (shared_expert_intermediate_size=20480)"),
    MoEDims("llama4_scout", 5120, 8192, 16, 1, 8192, 1, router="topk_sigmoid", renormalize=False,
            layers=48, moe_layers=48,
            source="meta-llama/Llama-4-Scout-17B-16E config.json (interleave_moe_layer_step=1)"),
    MoEDims("llama4_maverick", 5120, 8192, 128, 1, 8192, 1, router="topk_sigmoid", renormalize=False,
            layers=48, moe_layers=24,
            source="meta-llama/Llama-4-Maverick-17B-128E config.json (interleave_moe_layer_step=2)"),
    MoEDims("deepseek_v2_lite", 2048, 1408, 64, 6, 1408, 2, renormalize=False, layers=27, moe_layers=26,
            source="deepseek-ai/DeepSeek-V2-Lite config.json (n_shared_experts=2, first_k_dense_replace=1)"),
    MoEDims("qwen3_30b_a3b", 2048, 768, 128, 8, layers=48, moe_layers=48,
            source="Qwen/Qwen3-30B-A3B config.json (no shared expert)"),
)}


def get_preset(name: str) -> MoEDims:
    """A preset by name; case, ``-`` and ``_`` are ignored (``DeepSeek-V3`` is ``deepseek_v3``).
    ``PRESET@tpN`` / ``PRESET@epN`` is one rank's compute (``simulator.workloads.ranks``)."""
    base, kind, n = split_rank_name(name)
    found = _BY_KEY.get(_key(base))
    if found is None:
        raise InputError(f"unknown MoE preset {base!r}; known: {', '.join(PRESETS)} (with @tpN / @epN)")
    if kind is None:
        return found
    try:
        return MoEDims(**rank_fields(dataclasses.asdict(found), kind, n))
    except ValueError as err:
        raise InputError(str(err)) from None


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


_BY_KEY = {_key(name): dims for name, dims in PRESETS.items()}
