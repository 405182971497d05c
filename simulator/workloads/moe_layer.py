"""Emit one MoE layer into a ``ProgramBuilder``: the torch-op sequence of ``kernels_real.layer.MoELayer``.

One launch per torch op (its kernels' summed time is what the microbenchmarks time per op). Routed path:
cast to fp32, fp32 router GEMM, routing (softmax / grouped sigmoid / top-k sigmoid ops), sort and group
counts, gather, grouped GEMM gate_up, SiLU, mul, grouped GEMM down, weighted combine (gather of the weights,
zeros, cast, scale, index_add, cast back). Shared path: gate_up GEMM, SiLU, mul, down GEMM (Qwen2: × a
sigmoid gate); then the add. Strategies (vLLM's names plus FSE):

- ``sequential``: everything on main, shared experts first;
- ``multi_stream``: per micro-batch the event pair kernels_real reuses: main records input-ready, the host
  switches to aux, aux waits, runs the shared experts (reading the routed input buffer itself: the seed-000
  alias), records output-ready, the host switches back; main runs the gate and the routed experts, waits on
  output-ready and adds;
- ``fused_shared``: the shared MLP folded into the grouped GEMMs as always-selected pseudo-experts.

``unsafe_inplace`` mirrors ``MoELayer.unsafe_inplace_demo``: main scales the input in place right after the
fork, racing with aux's reads. Communication hooks add dispatch / combine / all-reduce kernels in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator.cost import CostModel, KernelSpec, elementwise_grid_share, gemm_grid_share, table_key
from simulator.errors import InputError
from simulator.ir import Program
from simulator.profile import Profile
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.presets import MoEDims

MODES: tuple[str, ...] = ("eager", "graph")
F32, I32, I64 = 4, 4, 8


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


@dataclass(frozen=True)
class CommContext:
    """What a communication hook sees: the micro-batch, its token count, the layer's dims, the stream to
    issue on and the buffer it should read."""

    layer: str
    micro_batch: int
    tokens: int
    dims: MoEDims
    stream: str
    buffer: str


CommHook = Callable[[ProgramBuilder, CommContext], str | None]


@dataclass(frozen=True)
class CommHooks:
    """Optional hooks; each emits its kernels and returns the buffer the next kernel should read instead
    (``None``: unchanged). ``dispatch``: after routing, before the routed experts (all-to-all dispatch of
    the tokens); ``combine``: after the routed output (all-to-all combine); ``after``: after the layer
    output (all-reduce)."""

    dispatch: CommHook | None = None
    combine: CommHook | None = None
    after: CommHook | None = None


@dataclass(frozen=True)
class ExpertView:
    """What the routed experts of one grouped-GEMM pass process: expected routed rows and routed experts
    hit, plus ``chunks`` fused shared pseudo-experts of ``shared_rows`` rows each (``fused_shared``; 0
    otherwise), ``groups`` local experts and the expert width (one GPU: all experts; a rank of an EP/TP layout:
    its share, see ``decode_step``)."""

    routed_rows: float
    touched: float
    shared_rows: float
    chunks: int
    groups: int
    intermediate: int

    @property
    def rows(self) -> int:
        """Rows the grouped GEMMs process (routed and fused shared)."""
        return max(1, math.ceil(self.routed_rows + self.chunks * self.shared_rows - 1e-9))

    @property
    def active(self) -> float:
        """Groups with at least one row: the routed experts hit plus the fused shared chunks."""
        return self.touched + self.chunks


class LayerEmitter:
    """Issues one micro-batch's torch ops as costed launches on the builder."""

    def __init__(self, b: ProgramBuilder, dims: MoEDims, tokens: int, prefix: str) -> None:
        if b.cost is None:
            raise InputError("emitting an MoE layer needs a builder with a cost model")
        self.b, self.d, self.t, self.prefix = b, dims, tokens, prefix
        self.profile: Profile = b.cost.profile
        self.w = dims.dtype_bytes

    def buf(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def op(self, name: str, family: str, nbytes: float, reads: Sequence[str], writes: Sequence[str], *,
           elements: float = 0, flops: float = 0.0, gemm: tuple[int, int, int] | None = None,
           groups: float = 1, stream: str | None = None,
           table: tuple[str, float, float] | None = None, parts: tuple[tuple[float, float], ...] = (),
           op_key: str | None = None) -> str:
        """Launch one op; ``gemm`` = (rows per group, K, N); ``table`` = (measured-table key, x, count) for
        the cost model's lookup; ``op_key`` names the torch op (default: ``name``; GEMMs: none, they are
        looked up in measured tables). Returns the first written buffer."""
        fam = self.profile.family(family)
        sms = self.profile.hardware.sm_count
        if gemm is not None:
            m, k, n = gemm
            sm = gemm_grid_share(m, n, fam, sms, groups=max(1, round(groups)), depth=k)
        else:
            sm = elementwise_grid_share(elements, fam, sms)
        key, x, count = table or (None, 0.0, 1.0)
        spec = KernelSpec(name=name, family=family, flops=flops, bytes=nbytes, sm=sm,
                          rows=gemm[0] if gemm else None, reads=tuple(reads), writes=tuple(writes),
                          table=key, x=x, count=count, parts=parts,
                          op_key=op_key or (None if gemm is not None and family != "gemm_fp32" else name))
        self.b.launch(spec, stream)
        return writes[0] if writes else ""

    def ew(self, name: str, elements: float, bytes_per_elem: float, reads: Sequence[str],
           writes: Sequence[str], stream: str | None = None, family: str = "elementwise",
           rows_cols: tuple[int, int] | None = None, op_key: str | None = None) -> str:
        """An elementwise op; ``rows_cols`` (a contiguous bf16 silu / mul / add of that shape) names its
        measured table (``silu_and_mul``'s ops read strided halves: they have none)."""
        table = (table_key(name, N=rows_cols[1]), rows_cols[0], 1.0) if rows_cols else None
        return self.op(name, family, elements * bytes_per_elem, reads, writes, elements=elements,
                       stream=stream, table=table, op_key=op_key)

    def linear(self, name: str, x: str, k: int, n: int, out: str, stream: str | None = None,
               width: int | None = None, family: str = "gemm") -> str:
        w, t = width or self.w, self.t
        table = (table_key("mm", K=k, N=n), t, 1.0) if family == "gemm" else None
        return self.op(name, family, w * (t * k + k * n + t * n), [x], [out], flops=2.0 * t * k * n,
                       gemm=(t, k, n), stream=stream, table=table)

    # --- routed path -------------------------------------------------------------------------------
    def gate(self, x: str) -> tuple[str, str]:
        """``F.linear(x.float(), gate)`` and ``route``: returns (ids, weights) buffers."""
        d, t = self.d, self.t
        xf = self.ew("to_float", t * d.hidden, self.w + F32, [x], [self.buf("x_f32")], op_key="cast")
        logits = self.linear("router_gemm", xf, d.hidden, d.n_experts, self.buf("logits"), width=F32,
                             family="gemm_fp32")
        return self.route(logits)

    def route(self, logits: str) -> tuple[str, str]:
        d, t, e, k = self.d, self.t, self.d.n_experts, self.d.top_k
        ids, wts = self.buf("topk_ids"), self.buf("topk_weights")
        if d.router == "softmax":
            probs = self.ew("softmax", t * e, 2 * F32, [logits], [self.buf("probs")])
            self.topk("topk", t, e, k, probs, [wts, ids])
        elif d.router == "topk_sigmoid":
            top = self.buf("top_logits")
            self.topk("topk", t, e, k, logits, [top, ids])
            self.ew("sigmoid", t * k, 2 * F32, [top], [wts])
        else:
            self.grouped_sigmoid(logits, ids, wts)
        if d.renormalize:
            total = self.op("sum", "reduction", F32 * (t * k + t), [wts], [self.buf("weight_sum")],
                            elements=t * k)
            self.ew("div", t * k, 2 * F32, [wts, total], [wts])
        if d.routed_scaling_factor != 1.0:
            self.ew("scale", t * k, 2 * F32, [wts], [wts])
        return ids, wts

    def topk(self, name: str, rows: int, width: int, k: int, src: str, writes: Sequence[str]) -> None:
        self.op(name, "topk", F32 * rows * width + (F32 + I64) * rows * k, [src], writes,
                elements=rows * width)  # sorted top-k (two kernels); the microbench's is unsorted: no table

    def grouped_sigmoid(self, logits: str, ids: str, wts: str) -> None:
        """DeepSeek-V3 ``noaux_tc``, op by op as ``kernels_real.routing._grouped_sigmoid``."""
        d, t, e, g = self.d, self.t, self.d.n_experts, self.d.n_group
        scores = self.ew("sigmoid", t * e, 2 * F32, [logits], [self.buf("scores")])
        choice = self.ew("add_bias", t * e, 2 * F32, [scores], [self.buf("choice")])
        top2 = self.buf("group_top2")
        self.topk("topk_in_groups", t * g, e // g, 2, choice, [top2, self.buf("group_top2_ids")])
        gscores = self.op("sum", "reduction", F32 * (2 * t * g + t * g), [top2], [self.buf("group_scores")],
                          elements=2 * t * g)
        gids = self.buf("group_ids")
        self.topk("topk_groups", t, g, d.topk_group, gscores, [self.buf("group_top"), gids])
        mask = self.ew("zeros_like", t * g, F32, [], [self.buf("group_mask")])
        self.op("scatter", "gather", F32 * t * d.topk_group + I64 * t * d.topk_group, [gids, mask], [mask],
                elements=t * d.topk_group)
        # the expanded [T, G, E/G] mask reshaped to [T, E] is a copy, except with one group (a view then)
        emask = self.ew("expand_copy", t * e, F32, [mask], [self.buf("expert_mask")]) if g > 1 else mask
        eq = self.ew("eq", t * e, F32 + 1, [emask], [self.buf("mask_eq")])
        masked = self.ew("masked_fill", t * e, 2 * F32 + 1, [choice, eq], [self.buf("masked")])
        self.topk("topk", t, e, d.top_k, masked, [self.buf("masked_top"), ids])
        self.op("gather", "gather", (2 * F32 + I64) * t * d.top_k, [scores, ids], [wts],
                elements=t * d.top_k)

    def expert_view(self, n_groups: int, k: int) -> ExpertView:
        """The single-GPU view: all ``n_groups`` experts local (routed plus fused shared chunks), ``t × k`` rows."""
        d, t = self.d, self.t
        chunks = n_groups - d.n_experts
        return ExpertView(routed_rows=float(t * (k - chunks)), touched=touched_experts(d, t), shared_rows=float(t),
                          chunks=chunks, groups=n_groups, intermediate=d.moe_intermediate)

    def experts(self, x: str, ids: str, wts: str, n_groups: int, k: int) -> str:
        """``MoELayer._experts``: group, gather, two grouped GEMMs, weighted index_add; returns the output.
        The experts' sizes come from :meth:`expert_view` (a rank of an EP/TP layout overrides it)."""
        v = self.expert_view(n_groups, k)
        t, h, w = self.t, self.d.hidden, self.w
        rows, i, groups = v.rows, v.intermediate, v.groups
        order, sorted_ids = self.buf("order"), self.buf("sorted_ids")
        self.op("sort", "sort", 3 * I64 * rows, [ids], [sorted_ids, order], elements=rows,
                table=(table_key("sort"), rows, 1.0))
        ones = self.ew("ones_like", rows, I32, [], [self.buf("ones")])
        counts = self.ew("zeros", groups, I32, [], [self.buf("counts")])
        self.op("scatter_add", "reduction", (I64 + I32) * rows + I32 * groups, [ids, ones, counts], [counts],
                elements=rows)
        offsets = self.op("cumsum", "reduction", 2 * I32 * groups, [counts], [self.buf("offsets")],
                          elements=groups)
        token = self.ew("div_index", rows, 2 * I64, [order], [self.buf("token")])
        xs = self.op("index_select", "gather", w * 2 * rows * h + I64 * rows, [x, token],
                     [self.buf("x_sorted")], elements=rows * h, table=(table_key("index_select", N=h), rows, 1.0))
        per_group = max(1, round(rows / max(v.active, 1.0)))
        # measured tables: the routed experts at their mean rows, each fused shared chunk at its rows
        per_routed, shared_part = v.routed_rows / v.touched, ((v.shared_rows, float(v.chunks)),) if v.chunks else ()
        gu = self.op("grouped_mm_gate_up", "grouped_gemm",
                     w * (rows * h + v.active * h * 2 * i + rows * 2 * i) + I32 * groups, [xs, offsets],
                     [self.buf("gate_up")], flops=2.0 * rows * h * 2 * i, gemm=(per_group, h, 2 * i),
                     groups=v.active, table=(table_key("grouped_mm", K=h, N=2 * i), per_routed, v.touched),
                     parts=shared_part)
        act = self.ew("silu", rows * i, 2 * w, [gu], [self.buf("silu")], op_key="act_silu")
        act = self.ew("mul", rows * i, 3 * w, [act, gu], [self.buf("act")], op_key="act_mul")
        y = self.op("grouped_mm_down", "grouped_gemm",
                    w * (rows * i + v.active * i * h + rows * h) + I32 * groups, [act, offsets],
                    [self.buf("down")], flops=2.0 * rows * i * h, gemm=(per_group, i, h), groups=v.active,
                    table=(table_key("grouped_mm", K=i, N=h), per_routed, v.touched), parts=shared_part)
        scale = self.op("index_select", "gather", (2 * F32 + I64) * rows, [wts, order], [self.buf("scale")],
                        elements=rows)
        out = self.ew("zeros", t * h, F32, [], [self.buf("combine_f32")])
        yf = self.ew("to_float", rows * h, w + F32, [y], [self.buf("down_f32")], op_key="cast")
        yf = self.ew("mul", rows * h, 2 * F32 + F32 / h, [yf, scale], [self.buf("down_scaled")],
                     op_key="combine_mul")
        self.op("index_add", "reduction", F32 * (rows * h + 2 * t * h) + I64 * rows, [yf, token, out], [out],
                elements=rows * h)
        return self.ew("to_bf16", t * h, F32 + w, [out], [self.buf("routed_out")], op_key="cast")

    def fused_weights(self, x: str, ids: str, wts: str) -> tuple[str, str]:
        """``MoELayer._fused``: append the shared pseudo-experts to the ids and weights."""
        d, t, s = self.d, self.t, self.d.fused_shared_chunks
        if d.shared_gate:
            g = self.linear("shared_gate_gemm", x, d.hidden, 1, self.buf("shared_gate_logit"))
            g = self.ew("to_float", t, self.w + F32, [g], [self.buf("shared_gate_f32")], op_key="cast")
            sw = self.ew("sigmoid", t, 2 * F32, [g], [self.buf("shared_weight")])
        else:
            sw = self.ew("ones", t * s, F32, [], [self.buf("shared_weight")])
        all_ids = self.op("cat", "gather", 2 * I64 * t * (d.top_k + s), [ids], [self.buf("ids_fused")],
                          elements=t * (d.top_k + s))
        all_wts = self.op("cat", "gather", 2 * F32 * t * (d.top_k + s), [wts, sw], [self.buf("weights_fused")],
                          elements=t * (d.top_k + s))
        return all_ids, all_wts

    # --- shared path -------------------------------------------------------------------------------
    def shared(self, x: str, stream: str | None = None) -> str:
        d, t, w, width = self.d, self.t, self.w, self.d.shared_total
        gu = self.linear("shared_gemm_gate_up", x, d.hidden, 2 * width, self.buf("shared_gate_up"), stream)
        act = self.ew("silu", t * width, 2 * w, [gu], [self.buf("shared_silu")], stream, op_key="act_silu")
        act = self.ew("mul", t * width, 3 * w, [act, gu], [self.buf("shared_act")], stream, op_key="act_mul")
        y = self.linear("shared_gemm_down", act, width, d.hidden, self.buf("shared_out"), stream)
        if d.shared_gate:
            g = self.linear("shared_gate_gemm", x, d.hidden, 1, self.buf("shared_gate_logit"), stream)
            g = self.ew("sigmoid", t, 2 * w, [g], [self.buf("shared_gate")], stream)
            y = self.ew("mul", t * d.hidden, 2 * w + w / d.hidden, [y, g], [self.buf("shared_gated")], stream,
                        op_key="gate_mul")
        return y

    def add(self, a: str, c: str, out: str) -> str:
        return self.ew("add", self.t * self.d.hidden, 3 * self.w, [a, c], [out], rows_cols=(self.t, self.d.hidden))


def split_tokens(tokens: int, micro_batches: int) -> list[int]:
    """Token counts of the micro-batches (``x.chunk``: the first takes the odd token)."""
    if micro_batches not in (1, 2):
        raise InputError(f"micro_batches must be 1 or 2, got {micro_batches}")
    if tokens < micro_batches:
        raise InputError(f"{tokens} token(s) cannot be split into {micro_batches} micro-batches")
    first = -(-tokens // micro_batches)
    return [first] + [tokens - first] * (micro_batches - 1)


def emit_moe_layer(b: ProgramBuilder, dims: MoEDims, tokens: int, strategy: str = "multi_stream", *,
                   micro_batches: int = 1, aux: str = "aux", layer: str = "moe",
                   inputs: Sequence[str] | None = None, hooks: CommHooks | None = None,
                   unsafe_inplace: bool = False) -> list[str]:
    """Issue one MoE layer from the builder's current stream (main); returns each micro-batch's output
    buffer. ``inputs``: the micro-batches' input buffers (default ``{layer}.ub{i}.x``)."""
    reason = dims.applicable(strategy)
    if reason:
        raise InputError(reason)
    if tokens <= 0:
        raise InputError(f"tokens must be positive, got {tokens}")
    if unsafe_inplace and strategy != "multi_stream":
        raise InputError("unsafe_inplace only applies to multi_stream")
    hooks = hooks or CommHooks()
    main = b.current
    if strategy == "multi_stream":
        b.stream(aux)
    counts = split_tokens(tokens, micro_batches)
    if inputs is not None and len(inputs) != len(counts):
        raise InputError(f"{len(inputs)} input buffers for {len(counts)} micro-batches")
    outputs = []
    for ub, t in enumerate(counts):
        e = LayerEmitter(b, dims, t, f"{layer}.ub{ub}")
        x = inputs[ub] if inputs else e.buf("x")

        def hook(fn: CommHook | None, buffer: str, ub: int = ub, t: int = t) -> str:
            if fn is None:
                return buffer
            return fn(b, CommContext(layer, ub, t, dims, main, buffer)) or buffer

        def routed(x: str = x, e: LayerEmitter = e, hook: Callable[..., str] = hook) -> str:
            ids, wts = e.gate(x)
            n_groups, k = dims.n_experts, dims.top_k
            if strategy == "fused_shared":
                ids, wts = e.fused_weights(x, ids, wts)
                n_groups += dims.fused_shared_chunks
                k += dims.fused_shared_chunks
            src = hook(hooks.dispatch, x)
            return hook(hooks.combine, e.experts(src, ids, wts, n_groups, k))

        if strategy == "multi_stream":
            ready, done = f"ub{ub}.input_ready", f"ub{ub}.output_ready"
            b.record(ready, main)
            with b.using(aux):
                b.wait(ready, aux)
                shared = e.shared(x, aux)
                b.record(done, aux)
            if unsafe_inplace:
                e.ew("scale_input_inplace", t * dims.hidden, 2 * e.w, [x], [x])
            routed_out = routed()
            b.wait(done, main)
            out = e.add(routed_out, shared, e.buf("out"))
        elif strategy == "sequential" and dims.has_shared:
            shared = e.shared(x)
            out = e.add(routed(), shared, e.buf("out"))
        else:
            out = routed()
        outputs.append(hook(hooks.after, out))
    return outputs


def moe_layer_program(dims: MoEDims, tokens: int, strategy: str, profile: Profile, *,
                      micro_batches: int = 1, mode: str = "eager", iterations: int = 1,
                      layers_per_graph: int = 1, **layer_options: object) -> Program:
    """The layer as kernels_real's bench runs it: ``iterations`` eager calls back to back, or (``graph``)
    ``layers_per_graph`` calls captured into one graph, replayed ``iterations`` times. Host costs are the
    profile's API costs (the engine charges captured ops nothing, a replay its cost and node gaps)."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if iterations < 1 or layers_per_graph < 1:
        raise InputError("iterations and layers_per_graph must be >= 1")
    b = ProgramBuilder(name=f"{dims.name} T={tokens} {strategy} ub={micro_batches} {mode}",
                       host=profile.host_costs("eager"), cost=CostModel(profile))

    def layer(name: str) -> None:
        emit_moe_layer(b, dims, tokens, strategy, micro_batches=micro_batches, layer=name,
                       **layer_options)  # type: ignore[arg-type]

    if mode == "graph":
        with b.capture("moe_layer"):
            for i in range(layers_per_graph):
                layer(f"moe{i}")
        for _ in range(iterations):
            b.replay("moe_layer")
    else:
        for i in range(iterations):
            layer(f"moe{i}")
    return b.build()
