"""Scenario files: model × platform × parallelism × load × strategies, validated with pydantic.

A scenario is YAML (see ``scenarios/*.yaml``; ``moesim schema`` prints the JSON schema). Errors are one
line naming the file, the field path and what was expected. ``--set a.b=v`` overrides are applied to the
decoded document before validation, so they are checked exactly like the file.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulator.errors import EXPONENT_NUMBER, InputError, describe_validation_error
from simulator.ir import read_document
from simulator.workloads.attention import STEP_SHAPES, AttentionDims, StepShape, check_tp
from simulator.workloads.layout import Parallelism
from simulator.workloads.presets import PRESETS, STRATEGIES, MoEDims, RouterKind, Strategy, get_preset

# Sane upper bounds (the schema names them; every number is also required finite).
MAX_WIDTH = 2**20  # hidden sizes, intermediate sizes, head dims, ranks
MAX_COUNT = 2**16  # experts, heads, groups, GPUs in one parallel dimension
MAX_LAYERS = 10_000
MAX_VOCAB = 2**24
MAX_TOKENS = 2**20  # requests (one token each per decode step) and token thresholds
MAX_LEN = 2**24  # prompt and output lengths
MAX_LINK_GBPS = 1e6
MAX_LATENCY_US = 1e6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class MoESpec(_Strict):
    """Explicit MoE dimensions; with a preset they override its fields (e.g. a cheaper shared expert)."""

    hidden: int | None = Field(None, gt=0, le=MAX_WIDTH)
    moe_intermediate: int | None = Field(None, gt=0, le=MAX_WIDTH)
    n_experts: int | None = Field(None, gt=0, le=MAX_COUNT)
    top_k: int | None = Field(None, gt=0, le=MAX_COUNT)
    shared_intermediate: int | None = Field(None, ge=0, le=MAX_WIDTH)
    n_shared: int | None = Field(None, ge=0, le=MAX_COUNT)
    router: RouterKind | None = None
    n_group: int | None = Field(None, gt=0, le=MAX_COUNT)
    topk_group: int | None = Field(None, gt=0, le=MAX_COUNT)


class AttentionSpec(_Strict):
    """Attention shape: MLA (DeepSeek, Kimi) or GQA; with a preset, overrides its fields."""

    kind: Literal["mla", "gqa"] | None = None
    heads: int | None = Field(None, gt=0, le=MAX_COUNT)
    kv_heads: int | None = Field(None, ge=0, le=MAX_COUNT)
    head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)
    q_lora_rank: int | None = Field(None, ge=0, le=MAX_WIDTH, description="0: no query compression")
    kv_lora_rank: int | None = Field(None, gt=0, le=MAX_WIDTH)
    qk_nope_head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)
    qk_rope_head_dim: int | None = Field(None, ge=0, le=MAX_WIDTH)
    v_head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)


class ModelSpec(_Strict):
    preset: str | None = Field(None, description=f"one of {', '.join(PRESETS)} (case, '-' and '_' ignored)")
    name: str | None = Field(None, description="label for outputs (default: the preset)")
    moe: MoESpec = MoESpec()
    attention: AttentionSpec = AttentionSpec()
    layers: int | None = Field(None, gt=0, le=MAX_LAYERS, description="decoder layers (default: the preset's)")
    moe_layers: int | None = Field(None, ge=0, le=MAX_LAYERS, description="of which MoE (the rest are dense)")
    dense_intermediate: int | None = Field(None, ge=0, le=MAX_WIDTH, description="dense-layer MLP width")
    vocab: int | None = Field(None, gt=0, le=MAX_VOCAB)

    @model_validator(mode="after")
    def _resolvable(self) -> ModelSpec:
        if self.preset is not None:
            get_preset_or_error(self.preset)
        else:
            missing = [f for f in ("hidden", "moe_intermediate", "n_experts", "top_k") if getattr(self.moe, f) is None]
            missing += [f"attention.{f}" for f in ("kind", "heads") if getattr(self.attention, f) is None]
            missing += [f for f in ("layers", "vocab") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"without a preset, give {', '.join(missing)}")
        dims = self.moe_dims()
        if dims.moe_layers > dims.layers:
            raise ValueError(f"moe_layers {dims.moe_layers} > layers {dims.layers}")
        if dims.top_k > dims.n_experts:
            raise ValueError(f"top_k {dims.top_k} > n_experts {dims.n_experts}")
        return self

    def moe_dims(self) -> MoEDims:
        base = get_preset(self.preset) if self.preset else MoEDims("custom", 1, 1, 1, 1)
        updates = {k: v for k, v in self.moe.model_dump().items() if v is not None}
        if self.layers is not None:
            updates["layers"] = self.layers
            updates.setdefault("moe_layers", self.layers if self.preset is None else min(base.moe_layers,
                                                                                         self.layers))
        if self.moe_layers is not None:
            updates["moe_layers"] = self.moe_layers
        if self.name:
            updates["name"] = self.name
        return replace(base, **updates)

    def step_shape(self) -> StepShape:
        base = STEP_SHAPES[get_preset(self.preset).name] if self.preset else None
        attn_updates = {k: v for k, v in self.attention.model_dump().items() if v is not None}
        attention = replace(base.attention, **attn_updates) if base else AttentionDims(**attn_updates)
        return StepShape(
            attention=attention,
            dense_intermediate=self.dense_intermediate if self.dense_intermediate is not None
            else (base.dense_intermediate if base else 0),
            vocab=self.vocab or (base.vocab if base else 1),
            source=(base.source if base else "explicit dimensions in the scenario")
            + (" with overrides" if base and (attn_updates or self.vocab or self.dense_intermediate) else ""),
        )


def get_preset_or_error(name: str) -> MoEDims:
    try:
        return get_preset(name)
    except InputError as err:
        raise ValueError(str(err)) from None


class PlatformSpec(_Strict):
    profile: str = Field(description="profile name (simulator/profiles/NAME.json) or path to a profile JSON")
    link_bandwidth_GBps: float | None = Field(None, gt=0, le=MAX_LINK_GBPS,
                                              description="override the profile's link bandwidth")
    link_latency_us: float | None = Field(None, ge=0, le=MAX_LATENCY_US,
                                          description="override the profile's link latency")


class ParallelismSpec(_Strict):
    tp: int = Field(1, ge=1, le=MAX_COUNT, description="tensor parallel size (attention heads, dense layers)")
    dp: int = Field(1, ge=1, le=MAX_COUNT, description="data-parallel attention size (DP ranks)")
    ep: int = Field(1, ge=1, le=MAX_COUNT, description="expert parallel size (1 or tp × dp)")

    def layout(self) -> Parallelism:
        return Parallelism(self.tp, self.dp, self.ep)


class LoadSpec(_Strict):
    concurrency: int = Field(ge=1, le=MAX_TOKENS, description="running requests (one token each per decode step)")
    concurrency_scope: Literal["per_dp_rank", "total"] = Field(
        "per_dp_rank", description="per_dp_rank: each DP rank runs `concurrency` requests; total: the "
                                   "benchmark client's concurrency, spread over the DP ranks")
    input_len: int = Field(1024, ge=1, le=MAX_LEN)
    output_len: int = Field(1024, ge=1, le=MAX_LEN)

    def kv_len(self) -> int:
        """Mean cached length over the decode phase: the prompt plus half the output."""
        return self.input_len + self.output_len // 2

    def tokens(self, dp: int) -> tuple[int, int]:
        """(tokens on the busiest rank, distinct tokens entering the MoE across ranks) per decode step."""
        if self.concurrency_scope == "total":
            return math.ceil(self.concurrency / dp), self.concurrency
        return self.concurrency, self.concurrency * dp


class StrategiesSpec(_Strict):
    compare: list[Strategy] = Field(default_factory=lambda: list(STRATEGIES), min_length=1)
    dbo: list[bool] = Field(default_factory=lambda: [False], min_length=1,
                            description="dual-batch overlap (two micro-batches) off/on")
    token_threshold: int | None = Field(None, ge=0, le=MAX_TOKENS,
                                        description="multi_stream only at ≤ this many tokens per rank "
                                                    "(VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD)")
    dp_gate: bool = Field(False, description="multi_stream only when dp > 1 (the ROCm heuristic)")


class ThresholdsSpec(_Strict):
    margin: float = Field(0.005, ge=0, lt=1, description="step-time gain multi_stream must keep (fraction)")
    concurrency: list[Annotated[int, Field(ge=1, le=MAX_TOKENS)]] = Field(
        default_factory=lambda: [2 ** i for i in range(9)], min_length=1, max_length=256)


class Scenario(_Strict):
    name: str | None = None
    description: str | None = None
    model: ModelSpec
    platform: PlatformSpec
    parallelism: ParallelismSpec = ParallelismSpec()
    load: LoadSpec
    strategies: StrategiesSpec = StrategiesSpec()
    thresholds: ThresholdsSpec = ThresholdsSpec()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        dims = self.model.moe_dims()
        par = self.parallelism.layout()
        reason = par.check(dims) or check_tp(self.model.step_shape().attention, par.tp)
        if reason:
            raise ValueError(f"parallelism: {reason}")
        return self

    def label(self, source: str) -> str:
        return self.name or Path(source).stem


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario is a mapping with model, platform, load (see moesim schema)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise InputError(describe_validation_error(err, source, Scenario)) from None


def load_document(path: str | Path) -> dict[str, Any]:
    data = read_document(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a scenario is a mapping with model, platform, load (see moesim schema)")
    return data


def load_scenario(path: str | Path) -> Scenario:
    return parse_scenario(read_document(path), str(path))


def parse_value(text: str) -> Any:
    """A ``--set`` value as YAML (``8``, ``true``, ``h200``, ``[1, 2]``); a number in exponent form is a number
    (``1e3``, which YAML 1.1 reads as text)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError(f"--set value {text!r} is not valid YAML") from None
    return float(value) if isinstance(value, str) and EXPONENT_NUMBER.fullmatch(value.strip()) else value


def with_value(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``doc`` with the dotted ``path`` set to ``value`` (intermediate mappings created)."""
    parts = path.split(".")
    if not all(parts):
        raise InputError(f"--set {path!r}: empty field name")
    out = copy.deepcopy(doc)
    node = out
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise InputError(f"--set {path}: {'.'.join(parts[:i + 1])} is not a mapping")
        node = child
    node[parts[-1]] = value
    return out


def json_schema() -> dict[str, Any]:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "moesim scenario"
    return schema
