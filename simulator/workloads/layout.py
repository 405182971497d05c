"""One rank's share of the MoE work: the parallel layout, the micro-batch split, and what the rank's routed
experts see (``ExpertView``: expected rows and experts hit, local groups, expert width).

Parallelism (``tp`` × ``dp`` GPUs; ``ep`` divides them). A DP group of ``tp`` ranks serves its own
requests, so a rank's batch is ``t`` tokens (one per running request of its group); the MoE layer is shared
by all ranks. Derivation of what a rank's routed experts see (expected values):

- ``T`` distinct tokens enter the MoE per step: ``T = t·dp`` (each DP group brings its own; the ``tp``
  ranks of a group hold the same tokens);
- a rank holds ``E/ep`` experts; each expert is split ``s = tp·dp/ep`` ways along its intermediate width
  (``s = tp`` for plain TP MoE, ``1`` for full EP);
- a token's ``k`` picks land on a rank's experts with probability ``1/ep`` each, so the rank's experts
  receive ``T·k/ep`` rows; of the experts hit at least once by ``T`` tokens (``touched_experts``:
  ``E·(1 − (1 − k/E)^T)`` for uniform picks, fewer under kernels_real's biased ``grouped_sigmoid`` router,
  which the H200 profile was validated with) a rank holds ``1/ep``.
  DP8 + EP8: ``T = 8t`` gives ``t·k`` rows per rank (as many as it sent out); TP8 + EP8: ``T = t`` gives
  ``t·k/8``; TP8 alone: ``t·k`` rows over all ``E`` experts of width ``I/8``;
- ``fused_shared`` adds ``c = shared / I`` always-selected pseudo-experts, replicated once per EP rank
  (SGLang's shared-experts fusion), each token's shared rows staying on its local replica: ``c`` more
  groups of ``T/ep`` rows each per rank;
- the shared expert (unfused) is split ``tp`` ways and runs on the rank's own ``t`` tokens.

One GPU is the one-rank case; its view (``ExpertView.whole_layer``) counts the experts hit directly, the
view a rank of a decode step gets (``ExpertView.of_rank``) reads them off a grid (``grid_touched_experts``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator.errors import InputError
from simulator.workloads.presets import MoEDims


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    dp: int = 1
    ep: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.dp

    @property
    def all_to_all(self) -> bool:
        """Dispatch/combine over the EP group (DP attention with expert parallelism)."""
        return self.dp > 1 and self.ep > 1

    @property
    def expert_split(self) -> int:
        return self.world // self.ep

    def check(self, dims: MoEDims) -> str | None:
        """None if this layout is supported for ``dims``, else why not."""
        if min(self.tp, self.dp, self.ep) < 1:
            return "tp, dp and ep must be >= 1"
        if self.world % self.ep:
            return f"ep {self.ep} does not divide tp × dp = {self.world}"
        if self.dp > 1 and self.ep != self.world:
            return f"DP attention needs expert parallelism over all GPUs: ep = tp × dp = {self.world}"
        if dims.n_experts % self.ep:
            return f"{dims.n_experts} experts do not split over ep {self.ep}"
        if dims.moe_intermediate % self.expert_split or dims.shared_intermediate % self.tp:
            return f"expert widths of {dims.name} do not split {self.expert_split} / {self.tp} ways"
        return None

    def shared_width(self, dims: MoEDims) -> int:
        """Intermediate width of the rank's slice of the shared MLP (the shared experts split ``tp`` ways)."""
        return dims.n_shared * (dims.shared_intermediate // self.tp)


ONE_GPU = Parallelism()


def split_tokens(tokens: int, micro_batches: int) -> list[int]:
    """Token counts of the micro-batches (``x.chunk``: the first takes the odd token)."""
    if micro_batches not in (1, 2):
        raise InputError(f"micro_batches must be 1 or 2, got {micro_batches}")
    if tokens < micro_batches:
        raise InputError(f"{tokens} token(s) cannot be split into {micro_batches} micro-batches")
    first = -(-tokens // micro_batches)
    return [first] + [tokens - first] * (micro_batches - 1)


def expected_touched_experts(experts: int, top_k: int, tokens: int) -> float:
    """Expected number of distinct experts hit when ``tokens`` tokens each pick ``top_k`` of ``experts``
    uniformly: E·(1 − (1 − k/E)^T)."""
    if tokens <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


ROUTER_BIAS_STD = 0.1  # kernels_real.layer.MoEWeights.random: correction bias ~ N(0, 0.1²)
ROUTER_SAMPLES = 16


@lru_cache(maxsize=256)
def _grouped_sigmoid_touched(experts: int, n_group: int, topk_group: int, top_k: int, tokens: int) -> float:
    """Mean distinct experts hit by ``tokens`` tokens under kernels_real's random ``grouped_sigmoid`` router:
    logits ≈ i.i.d. N(0, 1) (unit-variance input times a gate scaled by hidden^-½), a correction bias fixed
    per expert ~ N(0, 0.1²); the bias concentrates the choice, so fewer experts are hit than uniformly.
    Seeded Monte-Carlo over ``ROUTER_SAMPLES`` draws of the bias and the logits."""
    rng = np.random.default_rng(12345)
    per_group = experts // n_group
    hits = []
    for _ in range(ROUTER_SAMPLES):
        bias = rng.normal(0.0, ROUTER_BIAS_STD, experts)
        choice = 1.0 / (1.0 + np.exp(-rng.normal(0.0, 1.0, (tokens, experts)))) + bias
        grouped = choice.reshape(tokens, n_group, per_group)
        group_scores = np.sort(grouped, axis=-1)[:, :, -min(2, per_group):].sum(-1)
        keep = np.argsort(-group_scores, axis=1)[:, :topk_group]
        mask = np.zeros((tokens, n_group), dtype=bool)
        np.put_along_axis(mask, keep, True, axis=1)
        masked = np.where(np.repeat(mask, per_group, axis=1), choice, -np.inf)
        hits.append(len(np.unique(np.argpartition(-masked, top_k - 1, axis=1)[:, :top_k])))
    return float(np.mean(hits))


def touched_experts(dims: MoEDims, tokens: int) -> float:
    """Expected distinct routed experts hit by ``tokens`` tokens in kernels_real's layer: uniform for routers
    without a bias (softmax, top-k sigmoid), the biased Monte-Carlo estimate for ``grouped_sigmoid``."""
    if dims.router != "grouped_sigmoid" or tokens <= 1:
        return min(expected_touched_experts(dims.n_experts, dims.top_k, tokens), float(dims.n_experts))
    return _grouped_sigmoid_touched(dims.n_experts, dims.n_group, dims.topk_group, dims.top_k, min(tokens, 4096))


TOUCHED_GRID_STEPS = 4  # grid points per doubling of the token count for the router's Monte-Carlo


def grid_touched_experts(dims: MoEDims, tokens: int) -> float:
    """``touched_experts``, with the Monte-Carlo of the biased ``grouped_sigmoid`` router run only at up to 16
    tokens and at the grid points ``round(2^(j/4))`` above (every power of two among them, so every measured
    token count), interpolated log-log in between. One Monte-Carlo costs up to 0.6 s, so a sweep over many
    batch sizes needs a few grid points instead of one per batch. The Monte-Carlo's own noise between
    neighbouring token counts is about ±3%; against direct calls (DeepSeek-V3 and Kimi-K2, 17 to 2000 tokens)
    the interpolation is within it (median 0.8%, max 3.5%). Closed-form (uniform) routers are exact."""
    if dims.router != "grouped_sigmoid" or tokens <= 16:
        return touched_experts(dims, tokens)
    j = math.floor(math.log2(tokens) * TOUCHED_GRID_STEPS + 1e-9)
    lo, hi = (round(2 ** (i / TOUCHED_GRID_STEPS)) for i in (j, j + 1))
    if tokens in (lo, hi):
        return touched_experts(dims, tokens)
    y_lo, y_hi = touched_experts(dims, lo), touched_experts(dims, hi)
    frac = math.log(tokens / lo) / math.log(hi / lo)
    return math.exp(math.log(y_lo) + frac * math.log(y_hi / y_lo))


@dataclass(frozen=True)
class ExpertView:
    """What the routed experts of one grouped-GEMM pass process: expected routed rows and routed experts
    hit, plus ``chunks`` fused shared pseudo-experts of ``shared_rows`` rows each (``fused_shared``; 0
    otherwise), ``groups`` local experts and the expert width."""

    routed_rows: float
    touched: float
    shared_rows: float
    chunks: int
    groups: int
    intermediate: int

    @classmethod
    def whole_layer(cls, dims: MoEDims, tokens: int, fused: bool, touched: float | None = None) -> ExpertView:
        """One GPU holding every expert: ``tokens × top_k`` routed rows, the experts they hit (``touched`` where
        known, e.g. a measured routing; else counted directly, ``touched_experts``), and under ``fused`` every
        token once per shared chunk."""
        chunks = dims.fused_shared_chunks if fused else 0
        hit = touched if touched is not None else touched_experts(dims, tokens)
        return cls(routed_rows=float(tokens * dims.top_k), touched=hit,
                   shared_rows=float(tokens), chunks=chunks, groups=dims.n_experts + chunks,
                   intermediate=dims.moe_intermediate)

    @classmethod
    def of_rank(cls, dims: MoEDims, par: Parallelism, tokens_group: float, fused: bool) -> ExpertView:
        """A rank's rows, touched experts, local groups and expert width for ``tokens_group`` distinct tokens
        entering the MoE (``T`` in the module docstring). Experts hit: ``grid_touched_experts`` over all
        ``T`` tokens, a rank holding a ``1/ep`` share of them (the router favours no rank's experts in
        expectation), never fewer than one nor more than its rows."""
        routed = tokens_group * dims.top_k / par.ep
        touched = grid_touched_experts(dims, max(1, round(tokens_group))) / par.ep
        chunks = dims.fused_shared_chunks if fused else 0
        return cls(routed, min(max(touched, 1.0), max(routed, 1.0)), tokens_group / par.ep if chunks else 0.0,
                   chunks, dims.n_experts // par.ep + chunks, dims.moe_intermediate // par.expert_split)

    @property
    def rows(self) -> int:
        """Rows the grouped GEMMs process (routed and fused shared)."""
        return max(1, math.ceil(self.routed_rows + self.chunks * self.shared_rows - 1e-9))

    @property
    def active(self) -> float:
        """Groups with at least one row: the routed experts hit plus the fused shared chunks."""
        return self.touched + self.chunks
