"""Decode-time attention of one layer, per rank: MLA (DeepSeek, Kimi) or GQA (Qwen, Llama 4), plus the
non-MoE shapes a decode step needs (dense MLP width, vocabulary).

Kernels of one attention block for ``t`` tokens (one per running request) with ``L`` cached tokens each,
under tensor parallelism ``tp`` (heads split ``tp`` ways):

- MLA, weight-absorbed as serving engines run decode: input RMSNorm; the fused down-projection
  ``hidden → q_lora + kv_lora + rope`` (replicated across TP ranks); the two latent norms; ``q_b``
  (``q_lora → heads/tp × (nope + rope)``; without ``q_lora``: ``hidden →`` the same); the per-head
  absorption of ``W_UK`` (a batched GEMM ``nope → kv_lora``); decode attention over the latent cache
  (``t × L × (kv_lora + rope)`` elements read, shared by all heads); the per-head ``W_UV``
  (``kv_lora → v``); ``o_proj`` (``heads/tp × v → hidden``).
- GQA: input RMSNorm; ``qkv_proj`` (``hidden → (heads/tp + 2·kv_heads/tp) × head_dim``); rotary; decode
  attention reading ``t × L × 2 × kv_heads/tp × head_dim`` cached elements; ``o_proj``.

The TP all-reduce after ``o_proj`` and the fused residual-add + post-attention RMSNorm are added by the
decode-step builder. Decode attention is modelled as split-KV ("flash decoding"): the grid is split along
the cache until it fills the device, so its time is the cache read at the profile's bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from simulator.cost import KernelSpec, elementwise_grid_share, gemm_grid_share
from simulator.errors import InputError
from simulator.workloads.builder import ProgramBuilder

AttentionKind = Literal["mla", "gqa"]
SPLIT_KV_CHUNK = 64  # cached tokens one split-KV block handles at least


@dataclass(frozen=True)
class AttentionDims:
    """Attention shape of one layer. MLA fields (``q_lora_rank`` 0 = no query compression) are ignored
    for GQA, ``kv_heads``/``head_dim`` for MLA."""

    kind: AttentionKind
    heads: int
    kv_heads: int = 0
    head_dim: int = 128
    q_lora_rank: int = 0
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128


@dataclass(frozen=True)
class StepShape:
    """What a decode step needs beyond the MoE layer: attention, the dense MLP width of the non-MoE layers
    (0: none), the vocabulary (lm_head) and where the figures come from."""

    attention: AttentionDims
    dense_intermediate: int
    vocab: int
    source: str


_MLA_V3 = AttentionDims("mla", heads=128, q_lora_rank=1536)
STEP_SHAPES: dict[str, StepShape] = {
    "deepseek_v3": StepShape(_MLA_V3, 18432, 129280, "deepseek-ai/DeepSeek-V3 config.json"),
    "kimi_k2": StepShape(AttentionDims("mla", heads=64, q_lora_rank=1536), 18432, 163840,
                         "moonshotai/Kimi-K2-Instruct config.json"),
    "deepseek_v2_lite": StepShape(AttentionDims("mla", heads=16, q_lora_rank=0), 10944, 102400,
                                  "deepseek-ai/DeepSeek-V2-Lite config.json (q_lora_rank null)"),
    "qwen2_57b_a14b": StepShape(AttentionDims("gqa", heads=28, kv_heads=4), 0, 151936,
                                "Qwen/Qwen2-57B-A14B config.json (every layer MoE)"),
    "qwen3_30b_a3b": StepShape(AttentionDims("gqa", heads=32, kv_heads=4), 0, 151936,
                               "Qwen/Qwen3-30B-A3B config.json (every layer MoE)"),
    "llama4_scout": StepShape(AttentionDims("gqa", heads=40, kv_heads=8), 0, 202048,
                              "meta-llama/Llama-4-Scout-17B-16E config.json (every layer MoE)"),
    "llama4_maverick": StepShape(AttentionDims("gqa", heads=40, kv_heads=8), 16384, 202048,
                                 "meta-llama/Llama-4-Maverick-17B-128E config.json (intermediate_size_mlp)"),
}


def check_tp(attn: AttentionDims, tp: int) -> str | None:
    """None if the heads split evenly over ``tp`` ranks, else why not."""
    if attn.heads % tp:
        return f"{attn.heads} attention heads do not split over TP {tp}"
    if attn.kind == "gqa" and attn.kv_heads > tp and attn.kv_heads % tp:
        return f"{attn.kv_heads} KV heads do not split over TP {tp}"
    return None


class KernelIssuer:
    """Costs and launches one block's kernels (``tokens`` wide, ``elem_bytes`` per element) on the builder's
    current stream."""

    def __init__(self, builder: ProgramBuilder, tokens: int, elem_bytes: int, prefix: str) -> None:
        if builder.cost is None:
            raise InputError("emitting attention needs a builder with a cost model")
        self.builder, self.tokens, self.elem_bytes, self.prefix = builder, tokens, elem_bytes, prefix
        self.sms = builder.cost.profile.hardware.sm_count
        self.profile = builder.cost.profile

    def buf(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def launch(self, name: str, family: str, *, nbytes: float, flops: float = 0.0, sm: float,
               rows: int | None = None, reads: tuple[str, ...] = (), out: str) -> str:
        self.builder.launch(KernelSpec(name=name, family=family, flops=flops, bytes=nbytes, sm=sm, rows=rows,
                                       reads=reads, writes=(self.buf(out),)))
        return self.buf(out)

    def gemm(self, name: str, x: str, depth: int, width: int, out: str, groups: int = 1) -> str:
        """``groups`` independent ``tokens × depth @ depth × width`` GEMMs (a batched GEMM when > 1)."""
        tokens, elem = self.tokens, self.elem_bytes
        family = self.profile.family("gemm")
        sm = gemm_grid_share(tokens, width, family, self.sms, groups=groups, depth=depth)
        return self.launch(name, "gemm", nbytes=elem * groups * (tokens * depth + depth * width + tokens * width),
                           flops=2.0 * groups * tokens * depth * width, sm=sm, rows=tokens, reads=(x,), out=out)

    def elementwise(self, name: str, x: str, elements: float, bytes_per_elem: float, out: str) -> str:
        sm = elementwise_grid_share(elements, self.profile.family("elementwise"), self.sms)
        return self.launch(name, "elementwise", nbytes=elements * bytes_per_elem, sm=sm, reads=(x,), out=out)

    def decode_attention(self, x: str, cache_bytes: float, flops: float, head_blocks: int, length: int) -> str:
        """Split-KV decode attention: ``tokens × head_blocks`` blocks, each cache split in chunks until the
        grid covers the device (at most one chunk per ``SPLIT_KV_CHUNK`` cached tokens)."""
        base = self.tokens * head_blocks
        splits = min(math.ceil(max(length, 1) / SPLIT_KV_CHUNK), max(1, math.ceil(self.sms / base)))
        sm = min(1.0, base * splits / self.sms)
        return self.launch("decode_attention", "attention", nbytes=cache_bytes, flops=flops, sm=sm,
                           reads=(x, self.buf("kv_cache")), out="attn_out")


def emit_attention(builder: ProgramBuilder, attn: AttentionDims, hidden: int, dtype_bytes: int, tokens: int,
                   kv_len: int, tp: int, prefix: str = "attn") -> str:
    """Issue one attention block (without the all-reduce) on the current stream; returns its output."""
    reason = check_tp(attn, tp)
    if reason:
        raise InputError(reason)
    kernels = KernelIssuer(builder, tokens, dtype_bytes, prefix)
    elem, heads = dtype_bytes, attn.heads // tp
    x = kernels.elementwise("input_rmsnorm", kernels.buf("x"), tokens * hidden, 2 * elem, "x_norm")
    if attn.kind == "mla":
        latent, rope, nope = attn.kv_lora_rank, attn.qk_rope_head_dim, attn.qk_nope_head_dim
        q_head = nope + rope
        if attn.q_lora_rank:
            qkv = kernels.gemm("qkv_a_proj", x, hidden, attn.q_lora_rank + latent + rope, "qkv_a")
            q_lat = kernels.elementwise("q_a_rmsnorm", qkv, tokens * attn.q_lora_rank, 2 * elem, "q_a")
            q = kernels.gemm("q_b_proj", q_lat, attn.q_lora_rank, heads * q_head, "q")
        else:
            q = kernels.gemm("q_proj", x, hidden, heads * q_head, "q")
            qkv = kernels.gemm("kv_a_proj", x, hidden, latent + rope, "qkv_a")
        kernels.elementwise("kv_a_rmsnorm", qkv, tokens * latent, 2 * elem, "kv_a")
        q_abs = kernels.gemm("w_uk_absorb", q, nope, latent, "q_absorbed", groups=heads)
        kernels.elementwise("rotary", q_abs, tokens * heads * rope, 2 * elem, "q_rope")
        cache = elem * tokens * kv_len * (latent + rope)
        flops = 2.0 * tokens * heads * kv_len * (latent + rope + latent)
        out = kernels.decode_attention(q_abs, cache, flops, max(1, math.ceil(heads / 64)), kv_len)
        out = kernels.gemm("w_uv", out, latent, attn.v_head_dim, "attn_v", groups=heads)
        return kernels.gemm("o_proj", out, heads * attn.v_head_dim, hidden, "o")
    kv_heads = max(1, attn.kv_heads // tp)
    hd = attn.head_dim
    qkv = kernels.gemm("qkv_proj", x, hidden, (heads + 2 * kv_heads) * hd, "qkv")
    q = kernels.elementwise("rotary", qkv, tokens * (heads + kv_heads) * hd, 2 * elem, "q_rope")
    cache = elem * tokens * kv_len * 2 * kv_heads * hd
    flops = 4.0 * tokens * heads * kv_len * hd
    out = kernels.decode_attention(q, cache, flops, kv_heads, kv_len)
    return kernels.gemm("o_proj", out, heads * hd, hidden, "o")
