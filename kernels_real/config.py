"""MoE layer configuration and the public model shapes as presets (no torch import here)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from simulator.workloads.ranks import rank_fields, split_rank_name

RouterKind = Literal["softmax", "grouped_sigmoid", "topk_sigmoid"]
ROUTER_KINDS: tuple[str, ...] = ("softmax", "grouped_sigmoid", "topk_sigmoid")
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
STRATEGIES: tuple[str, ...] = ("sequential", "multi_stream", "fused_shared")


class ConfigError(ValueError):
    """A layer configuration, input shape or strategy that the layer cannot run."""


class NotApplicableError(ConfigError):
    """A strategy that does not apply to this configuration (e.g. multi-stream without a shared expert)."""


@dataclass(frozen=True)
class MoEConfig:
    """Shape and routing of one MoE layer.

    The shared experts (``n_shared`` of ``shared_intermediate`` each) are computed as one MLP of intermediate
    size ``n_shared * shared_intermediate``, as DeepSeek and vLLM do. ``router``:
    ``softmax`` (softmax over the logits, top-k, optional renormalisation);
    ``grouped_sigmoid`` (DeepSeek-V3: sigmoid scores, top-k chosen on scores + correction bias inside the best
    ``topk_group`` of ``n_group`` groups, weights = the chosen sigmoid scores);
    ``topk_sigmoid`` (Llama-4: top-k on the logits, weights = sigmoid of the chosen logits; Llama-4 scales
    the expert *input* by that weight, here it scales the output, which costs the same kernels).
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

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError with one clear line if the configuration is inconsistent."""
        for field in ("hidden", "moe_intermediate", "n_experts", "top_k"):
            if getattr(self, field) < 1:
                raise ConfigError(f"{self.name}: {field} must be >= 1, got {getattr(self, field)}")
        if self.top_k > self.n_experts:
            raise ConfigError(f"{self.name}: top_k={self.top_k} exceeds n_experts={self.n_experts}")
        if self.router not in ROUTER_KINDS:
            known = ", ".join(ROUTER_KINDS)
            raise ConfigError(f"{self.name}: unknown router {self.router!r}; known: {known}")
        if self.dtype not in DTYPES:
            known = ", ".join(DTYPES)
            raise ConfigError(f"{self.name}: unsupported dtype {self.dtype!r}; supported: {known}")
        if (self.n_shared == 0) != (self.shared_intermediate == 0):
            raise ConfigError(f"{self.name}: n_shared and shared_intermediate must both be 0 or both > 0")
        if self.n_shared < 0 or self.shared_intermediate < 0:
            raise ConfigError(f"{self.name}: n_shared and shared_intermediate must be >= 0")
        if self.shared_gate and not self.has_shared:
            raise ConfigError(f"{self.name}: shared_gate needs a shared expert")
        if self.router == "grouped_sigmoid":
            if self.n_group < 1 or self.n_experts % self.n_group:
                raise ConfigError(
                    f"{self.name}: n_experts={self.n_experts} not divisible by n_group={self.n_group}")
            per_group = self.n_experts // self.n_group
            if not 1 <= self.topk_group <= self.n_group:
                raise ConfigError(
                    f"{self.name}: topk_group={self.topk_group} must be in 1..n_group={self.n_group}")
            if self.top_k > self.topk_group * per_group:
                raise ConfigError(f"{self.name}: top_k={self.top_k} exceeds the experts of topk_group groups")
            if per_group < 2:
                raise ConfigError(f"{self.name}: grouped routing needs >= 2 experts per group")
        if self.routed_scaling_factor <= 0:
            raise ConfigError(f"{self.name}: routed_scaling_factor must be > 0")

    @property
    def has_shared(self) -> bool:
        """Whether the layer has shared experts (multi-stream applies only then)."""
        return self.n_shared > 0

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

    def applicable(self, strategy: str) -> str | None:
        """None if ``strategy`` applies, else the reason it does not."""
        if strategy not in STRATEGIES:
            return f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
        if strategy == "sequential":
            return None
        if not self.has_shared:
            return f"{self.name} has no shared expert: {strategy} not applicable"
        if strategy == "fused_shared" and not self.fused_shared_chunks:
            return (f"{self.name}: shared intermediate {self.shared_total} is not a multiple of the routed "
                    f"intermediate {self.moe_intermediate}: fused_shared not applicable")
        return None

    def weight_bytes(self) -> int:
        """Bytes of one weight set (routed + fused shared copy + shared MLP), gate and bias excluded."""
        width = 4 if self.dtype == "float32" else 2
        experts = self.n_experts + self.fused_shared_chunks
        routed = experts * 3 * self.hidden * self.moe_intermediate
        return width * (routed + 3 * self.hidden * self.shared_total)

    def scaled_down(self, hidden: int = 128, intermediate: int = 64, max_experts: int = 16) -> MoEConfig:
        """A tiny config with the same structure (router kind, group layout, shared ratio) for CPU runs."""
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


PRESETS: dict[str, MoEConfig] = {
    c.name: c
    for c in (
        MoEConfig("deepseek_v3", hidden=7168, moe_intermediate=2048, n_experts=256, top_k=8,
                  shared_intermediate=2048, n_shared=1, router="grouped_sigmoid", n_group=8, topk_group=4,
                  renormalize=True, routed_scaling_factor=2.5),
        MoEConfig("kimi_k2", hidden=7168, moe_intermediate=2048, n_experts=384, top_k=8,
                  shared_intermediate=2048, n_shared=1, router="grouped_sigmoid", n_group=1, topk_group=1,
                  renormalize=True, routed_scaling_factor=2.827),
        MoEConfig("qwen2_57b_a14b", hidden=3584, moe_intermediate=2560, n_experts=64, top_k=8,
                  shared_intermediate=20480, n_shared=1, router="softmax", renormalize=False,
                  shared_gate=True),
        MoEConfig("llama4_scout", hidden=5120, moe_intermediate=8192, n_experts=16, top_k=1,
                  shared_intermediate=8192, n_shared=1, router="topk_sigmoid", renormalize=False),
        MoEConfig("deepseek_v2_lite", hidden=2048, moe_intermediate=1408, n_experts=64, top_k=6,
                  shared_intermediate=1408, n_shared=2, router="softmax", renormalize=False),
        MoEConfig("qwen3_30b_a3b", hidden=2048, moe_intermediate=768, n_experts=128, top_k=8,
                  router="softmax", renormalize=True),
    )
}


def get_preset(name: str) -> MoEConfig:
    """The preset called ``name`` (``PRESET@tpN`` / ``PRESET@epN``: one rank's compute, see
    ``simulator.workloads.ranks``); ConfigError naming the known ones otherwise."""
    base, kind, n = split_rank_name(name)
    try:
        cfg = PRESETS[base]
    except KeyError:
        raise ConfigError(f"unknown preset {base!r}; known: {', '.join(PRESETS)} (with @tpN / @epN)") from None
    if kind is None:
        return cfg
    try:
        return MoEConfig(**rank_fields(dataclasses.asdict(cfg), kind, n))
    except ValueError as err:
        raise ConfigError(str(err)) from None
