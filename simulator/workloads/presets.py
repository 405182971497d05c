"""The model shapes, once: the MoE layer's dimensions and routing (``MoEDims``), the preset table, the
strategy names and the rank variants. Torch-free; the simulator's workloads and ``kernels_real`` (through
``kernels_real.config``, which checks a shape before the layer runs it) both read it.

Presets are from each model's published config.json; ``layers`` / ``moe_layers`` / ``source`` serve the
decode-step scenarios.

Rank variants: the compute one GPU does for one rank of tensor or expert parallelism. A name
``PRESET@tpN`` is one rank of TP N: every routed expert and the shared experts keep their count and hidden
size, their intermediate size is split N ways (the column/row-parallel split vLLM uses). ``PRESET@epN`` is
one rank of DP attention + EP N: the rank holds ``n_experts / N`` routed experts and receives, per step, its
own tokens' share of the assignments from every rank (the same ``tokens × top_k`` assignments in all, spread
over its local experts), and computes the replicated shared experts for its own tokens; its router scores
only the local experts (a GEMM ``n_experts / N`` wide instead of all: a small under-count). The collective
(all-reduce after TP, dispatch / combine around EP) is not part of the variant: it is the compute of a
rank, the regime of the seeds' TP8 vs DP comparison without the link.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from typing import Any, Literal

from simulator.errors import InputError

Strategy = Literal["sequential", "multi_stream", "fused_shared"]
STRATEGIES: tuple[Strategy, ...] = typing.get_args(Strategy)
RouterKind = Literal["softmax", "grouped_sigmoid", "topk_sigmoid"]
ROUTER_KINDS: tuple[RouterKind, ...] = typing.get_args(RouterKind)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class MoEDims:
    """Shape and routing of one MoE layer.

    The ``n_shared`` shared experts of ``shared_intermediate`` each are one MLP of width ``shared_total``,
    as DeepSeek and vLLM compute them. ``router``: ``softmax`` (softmax over the logits, top-k, optional
    renormalisation); ``grouped_sigmoid`` (DeepSeek-V3: sigmoid scores, top-k chosen on scores + correction
    bias inside the best ``topk_group`` of ``n_group`` groups, weights = the chosen sigmoid scores);
    ``topk_sigmoid`` (Llama-4: top-k on the logits, weights = sigmoid of the chosen logits; Llama-4 scales
    the expert *input* by that weight, kernels_real the output, which costs the same kernels).
    ``routed_scaling_factor`` multiplies the routed weights; ``shared_gate`` adds Qwen2's per-token sigmoid
    gate on the shared-expert output.
    """

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
        """Whether the layer has shared experts (multi-stream and fused_shared apply only then); a scenario
        may remove them with ``shared_intermediate: 0`` alone."""
        return self.n_shared > 0 and self.shared_intermediate > 0

    @property
    def shared_total(self) -> int:
        """Intermediate size of the single MLP that computes all shared experts."""
        return self.n_shared * self.shared_intermediate

    @property
    def fused_shared_chunks(self) -> int:
        """How many always-selected pseudo-experts the shared MLP becomes under ``fused_shared`` (0: n/a)."""
        if not self.has_shared or self.shared_total % self.moe_intermediate:
            return 0
        return self.shared_total // self.moe_intermediate

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def applicable(self, strategy: str) -> str | None:
        """None if ``strategy`` applies, else the reason it does not."""
        if strategy not in STRATEGIES:
            return f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
        if strategy != "sequential" and not self.has_shared:
            return f"{self.name} has no shared expert: {strategy} not applicable"
        if strategy == "fused_shared" and not self.fused_shared_chunks:
            return (f"{self.name}: shared intermediate {self.shared_total} is not a multiple of the routed "
                    f"intermediate {self.moe_intermediate}: fused_shared not applicable")
        return None

    def check(self) -> str | None:
        """None if the real layer can run this shape, else the first inconsistency, in one line."""
        for field in ("hidden", "moe_intermediate", "n_experts", "top_k"):
            if getattr(self, field) < 1:
                return f"{self.name}: {field} must be >= 1, got {getattr(self, field)}"
        if self.top_k > self.n_experts:
            return f"{self.name}: top_k={self.top_k} exceeds n_experts={self.n_experts}"
        if self.router not in ROUTER_KINDS:
            return f"{self.name}: unknown router {self.router!r}; known: {', '.join(ROUTER_KINDS)}"
        if self.dtype not in DTYPE_BYTES:
            return f"{self.name}: unsupported dtype {self.dtype!r}; supported: {', '.join(DTYPE_BYTES)}"
        if (self.n_shared == 0) != (self.shared_intermediate == 0):
            return f"{self.name}: n_shared and shared_intermediate must both be 0 or both > 0"
        if self.n_shared < 0 or self.shared_intermediate < 0:
            return f"{self.name}: n_shared and shared_intermediate must be >= 0"
        if self.shared_gate and not self.has_shared:
            return f"{self.name}: shared_gate needs a shared expert"
        if self.router == "grouped_sigmoid":
            if self.n_group < 1 or self.n_experts % self.n_group:
                return f"{self.name}: n_experts={self.n_experts} not divisible by n_group={self.n_group}"
            per_group = self.n_experts // self.n_group
            if not 1 <= self.topk_group <= self.n_group:
                return f"{self.name}: topk_group={self.topk_group} must be in 1..n_group={self.n_group}"
            if self.top_k > self.topk_group * per_group:
                return f"{self.name}: top_k={self.top_k} exceeds the experts of topk_group groups"
            if per_group < 2:
                return f"{self.name}: grouped routing needs >= 2 experts per group"
        if self.routed_scaling_factor <= 0:
            return f"{self.name}: routed_scaling_factor must be > 0"
        return None

    def weight_bytes(self) -> int:
        """Bytes of one weight set (routed + fused shared copy + shared MLP), gate and bias excluded."""
        experts = self.n_experts + self.fused_shared_chunks
        routed = experts * 3 * self.hidden * self.moe_intermediate
        return self.dtype_bytes * (routed + 3 * self.hidden * self.shared_total)

    def scaled_down(self, hidden: int = 128, intermediate: int = 64, max_experts: int = 16) -> typing.Self:
        """A tiny shape with the same structure (router kind, group layout, shared ratio) for CPU runs."""
        ratio = max(self.shared_total // self.moe_intermediate, 1) if self.has_shared else 0
        n_group = min(self.n_group, 4) if self.router == "grouped_sigmoid" else 1
        experts = max(min(self.n_experts, max_experts), self.top_k, 2 * n_group)
        experts -= experts % n_group
        topk_group = min(self.topk_group, n_group)
        top_k = min(self.top_k, topk_group * (experts // n_group))
        return dataclasses.replace(
            self, name=f"{self.name}-tiny", hidden=hidden, moe_intermediate=intermediate,
            n_experts=experts, top_k=top_k, n_group=n_group, topk_group=topk_group,
            shared_intermediate=intermediate * ratio // max(self.n_shared, 1) if self.has_shared else 0)


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
    MoEDims("glm45_air", 4096, 1408, 128, 8, 1408, 1, router="grouped_sigmoid", n_group=1, topk_group=1,
            layers=46, moe_layers=45,
            source="zai-org/GLM-4.5-Air config.json (noaux_tc, routed_scaling_factor=1.0, first_k_dense_replace=1)"),
    MoEDims("qwen15_moe_a27b", 2048, 1408, 60, 4, 5632, 1, renormalize=False, shared_gate=True,
            layers=24, moe_layers=24,
            source="Qwen/Qwen1.5-MoE-A2.7B config.json (shared_expert_intermediate_size=5632)"),
)}


def get_preset(name: str) -> MoEDims:
    """A preset by name; case, ``-`` and ``_`` are ignored (``DeepSeek-V3`` is ``deepseek_v3``).
    ``PRESET@tpN`` / ``PRESET@epN`` is one rank's compute (see the module docstring)."""
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
