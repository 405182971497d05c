"""The torch-op sequence of ``kernels_real.layer.MoELayer``, one costed launch per op (``LayerEmitter``).

One launch per torch op (its kernels' summed time is what the microbenchmarks time per op). Routed path:
cast to fp32, fp32 router GEMM, routing (softmax / grouped sigmoid / top-k sigmoid ops), sort and group
counts, gather, grouped GEMM gate_up, SiLU, mul, grouped GEMM down, weighted combine (gather of the weights,
zeros, cast, scale, index_add, cast back). Shared path: gate_up GEMM, SiLU, mul, down GEMM (Qwen2: × a
sigmoid gate); then the add. ``fused_shared`` folds the shared MLP into the grouped GEMMs as
always-selected pseudo-experts. Where the ops run and in which order is ``moe_block``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from simulator.cost import KernelSpec, elementwise_grid_share, gemm_grid_share, table_key
from simulator.errors import InputError
from simulator.profile import LaunchGeometry, Profile
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.layout import ExpertView
from simulator.workloads.presets import MoEDims

F32, I32, I64 = 4, 4, 8  # bytes of float32, int32, int64


class GemmShape(NamedTuple):
    """A (grouped) GEMM's rows per group, reduction depth K and output width N."""

    rows: int
    depth: int
    width: int


class TableLookup(NamedTuple):
    """Where the cost model reads a measured table: its key, the table's x (rows), how many such calls."""

    key: str
    x: float
    count: float = 1.0


@dataclass(slots=True)
class TorchOp:
    """One torch op as the cost model sees it: bytes moved, buffers read and written, elements (the grid of
    an elementwise op), flops and GEMM shape over ``groups`` groups, its measured table and the fused shared
    ``parts`` of a grouped GEMM, ``op_key``, the torch op it is fitted as (default: ``name``; GEMMs: none,
    they are looked up in measured tables), and a GEMM's ``geometry``: the launch recorded on this GPU, if any."""

    name: str
    family: str
    nbytes: float
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    elements: float = 0
    flops: float = 0.0
    gemm: GemmShape | None = None
    groups: float = 1
    table: TableLookup | None = None
    parts: tuple[tuple[float, float], ...] = ()
    op_key: str | None = None
    geometry: LaunchGeometry | None = None


def router_op_key(rows: int) -> str:
    """The op the fp32 router GEMM of ``rows`` rows is fitted as: ``router_gemv`` for one row, which cuBLAS runs
    as a matrix-vector kernel (``gemv`` / ``dot_kernel`` in the layer traces), else ``router_gemm`` (a split-K
    SIMT or xmma GEMM, 2-4× the GEMV's time at the same weight bytes in the traces)."""
    return "router_gemv" if rows == 1 else "router_gemm"


class LayerEmitter:
    """Issues one micro-batch's torch ops as costed launches on the builder; buffers are named
    ``{prefix}.{name}``."""

    def __init__(self, builder: ProgramBuilder, dims: MoEDims, tokens: int, prefix: str) -> None:
        if builder.cost is None:
            raise InputError("emitting an MoE layer needs a builder with a cost model")
        self.builder, self.dims, self.tokens, self.prefix = builder, dims, tokens, prefix
        self.profile: Profile = builder.cost.profile
        self.elem_bytes = dims.dtype_bytes

    def buf(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def launch(self, op: TorchOp, stream: str | None = None) -> str:
        """Launch ``op`` on ``stream`` (default: the builder's current one); returns its first written buffer."""
        family = self.profile.family(op.family)
        sms = self.profile.hardware.sm_count
        if op.gemm is not None:
            sm = gemm_grid_share(op.gemm.rows, op.gemm.width, family, sms, groups=max(1, round(op.groups)),
                                 depth=op.gemm.depth)
        else:
            sm = elementwise_grid_share(op.elements, family, sms)
        key, x, count = op.table or (None, 0.0, 1.0)
        is_table_gemm = op.gemm is not None and op.family != "gemm_fp32"
        spec = KernelSpec(name=op.name, family=op.family, flops=op.flops, bytes=op.nbytes, sm=sm,
                          rows=op.gemm.rows if op.gemm else None, reads=op.reads, writes=op.writes,
                          table=key, x=x, count=count, parts=op.parts,
                          op_key=op.op_key or (None if is_table_gemm else op.name),
                          flops_per_x=2.0 * op.gemm.depth * op.gemm.width if is_table_gemm else 0.0,
                          geometry=op.geometry)
        self.builder.launch(spec, stream)
        return op.writes[0] if op.writes else ""

    def elementwise(self, name: str, elements: float, bytes_per_elem: float, reads: Sequence[str],
                    writes: Sequence[str], stream: str | None = None, family: str = "elementwise",
                    rows_cols: tuple[int, int] | None = None, op_key: str | None = None) -> str:
        """An elementwise op; ``rows_cols`` (a contiguous bf16 silu / mul / add of that shape) names its
        measured table (``silu_and_mul``'s ops read strided halves: they have none)."""
        table = TableLookup(table_key(name, N=rows_cols[1]), rows_cols[0]) if rows_cols else None
        return self.launch(TorchOp(name, family, elements * bytes_per_elem, tuple(reads), tuple(writes),
                                   elements=elements, table=table, op_key=op_key), stream)

    def linear(self, name: str, x: str, depth: int, width: int, out: str, stream: str | None = None,
               elem_bytes: int | None = None, family: str = "gemm", op_key: str | None = None) -> str:
        """``F.linear`` of the micro-batch's tokens: [tokens, depth] × [depth, width]."""
        elem, tokens = elem_bytes or self.elem_bytes, self.tokens
        table = TableLookup(table_key("mm", K=depth, N=width), tokens) if family == "gemm" else None
        return self.launch(TorchOp(name, family, elem * (tokens * depth + depth * width + tokens * width), (x,),
                                   (out,), flops=2.0 * tokens * depth * width,
                                   gemm=GemmShape(tokens, depth, width), table=table, op_key=op_key,
                                   geometry=self.recorded("mm" if family == "gemm" else "mm_fp32", depth, width)),
                           stream)

    def recorded(self, op: str, depth: int, width: int, rows: int | None = None,
                 groups: int | None = None) -> LaunchGeometry | None:
        """The launch the profile recorded on its GPU for this GEMM at ``rows`` (default: the layer's token
        count; a grouped GEMM: its rows over its ``groups``), if any."""
        table = self.profile.launch_geometry
        dims = {"K": depth, "N": width} | ({"G": groups} if groups else {})
        return None if table is None else table.at(table_key(op, **dims), rows or self.tokens)

    def untabled(self, name: str, nbytes: float, reads: Sequence[str], writes: Sequence[str],
                  elements: float, family: str = "reduction") -> str:
        """A reduction, scatter, gather or cat op: no measured table, its grid from ``elements``."""
        return self.launch(TorchOp(name, family, nbytes, tuple(reads), tuple(writes), elements=elements))

    # --- routed path -------------------------------------------------------------------------------
    def gate(self, x: str) -> tuple[str, str]:
        """``F.linear(x.float(), gate)`` and ``route``: returns (ids, weights) buffers. The router GEMM is fitted
        as two ops (:func:`router_op_key`): cuBLAS runs it as a different kernel at one row."""
        dims, tokens = self.dims, self.tokens
        x_f32 = self.elementwise("to_float", tokens * dims.hidden, self.elem_bytes + F32, [x],
                                 [self.buf("x_f32")], op_key="cast")
        logits = self.linear("router_gemm", x_f32, dims.hidden, dims.n_experts, self.buf("logits"),
                             elem_bytes=F32, family="gemm_fp32", op_key=router_op_key(tokens))
        return self.route(logits)

    def route(self, logits: str) -> tuple[str, str]:
        dims, tokens, experts, top_k = self.dims, self.tokens, self.dims.n_experts, self.dims.top_k
        ids, weights = self.buf("topk_ids"), self.buf("topk_weights")
        if dims.router == "softmax":
            probs = self.elementwise("softmax", tokens * experts, 2 * F32, [logits], [self.buf("probs")])
            self.topk("topk", tokens, experts, top_k, probs, [weights, ids])
        elif dims.router == "topk_sigmoid":
            top = self.buf("top_logits")
            self.topk("topk", tokens, experts, top_k, logits, [top, ids])
            self.elementwise("sigmoid", tokens * top_k, 2 * F32, [top], [weights])
        else:
            self.grouped_sigmoid(logits, ids, weights)
        if dims.renormalize:
            total = self.untabled("sum", F32 * (tokens * top_k + tokens), [weights], [self.buf("weight_sum")],
                                   elements=tokens * top_k)
            self.elementwise("div", tokens * top_k, 2 * F32, [weights, total], [weights])
        if dims.routed_scaling_factor != 1.0:
            self.elementwise("scale", tokens * top_k, 2 * F32, [weights], [weights])
        return ids, weights

    def topk(self, name: str, rows: int, width: int, k: int, src: str, writes: Sequence[str]) -> None:
        # sorted top-k (two kernels); the microbench's is unsorted: no table
        self.launch(TorchOp(name, "topk", F32 * rows * width + (F32 + I64) * rows * k, (src,), tuple(writes),
                            elements=rows * width))

    def grouped_sigmoid(self, logits: str, ids: str, weights: str) -> None:
        """DeepSeek-V3 ``noaux_tc``, op by op as ``kernels_real.routing._grouped_sigmoid``."""
        dims, tokens, experts, groups = self.dims, self.tokens, self.dims.n_experts, self.dims.n_group
        scores = self.elementwise("sigmoid", tokens * experts, 2 * F32, [logits], [self.buf("scores")])
        choice = self.elementwise("add_bias", tokens * experts, 2 * F32, [scores], [self.buf("choice")])
        top2 = self.buf("group_top2")
        self.topk("topk_in_groups", tokens * groups, experts // groups, 2, choice,
                  [top2, self.buf("group_top2_ids")])
        group_scores = self.untabled("sum", F32 * (2 * tokens * groups + tokens * groups), [top2],
                                      [self.buf("group_scores")], elements=2 * tokens * groups)
        group_ids = self.buf("group_ids")
        self.topk("topk_groups", tokens, groups, dims.topk_group, group_scores, [self.buf("group_top"), group_ids])
        mask = self.elementwise("zeros_like", tokens * groups, F32, [], [self.buf("group_mask")])
        self.untabled("scatter", F32 * tokens * dims.topk_group + I64 * tokens * dims.topk_group,
                       [group_ids, mask], [mask], elements=tokens * dims.topk_group, family="gather")
        # the expanded [T, G, E/G] mask reshaped to [T, E] is a copy, except with one group (a view then)
        expert_mask = (self.elementwise("expand_copy", tokens * experts, F32, [mask], [self.buf("expert_mask")])
                       if groups > 1 else mask)
        equal = self.elementwise("eq", tokens * experts, F32 + 1, [expert_mask], [self.buf("mask_eq")])
        masked = self.elementwise("masked_fill", tokens * experts, 2 * F32 + 1, [choice, equal],
                                  [self.buf("masked")])
        self.topk("topk", tokens, experts, dims.top_k, masked, [self.buf("masked_top"), ids])
        self.untabled("gather", (2 * F32 + I64) * tokens * dims.top_k, [scores, ids], [weights],
                       elements=tokens * dims.top_k, family="gather")

    def experts(self, x: str, ids: str, weights: str, view: ExpertView) -> str:
        """``MoELayer._experts``: group, gather, two grouped GEMMs, weighted index_add; returns the output.
        The experts' sizes are ``view``'s (one GPU's whole layer, or a rank's share of it)."""
        tokens, hidden, elem = self.tokens, self.dims.hidden, self.elem_bytes
        rows, width, groups = view.rows, view.intermediate, view.groups
        order, sorted_ids = self.buf("order"), self.buf("sorted_ids")
        self.launch(TorchOp("sort", "sort", 3 * I64 * rows, (ids,), (sorted_ids, order), elements=rows,
                            table=TableLookup(table_key("sort"), rows)))
        ones = self.elementwise("ones_like", rows, I32, [], [self.buf("ones")])
        counts = self.elementwise("zeros", groups, I32, [], [self.buf("counts")])
        self.untabled("scatter_add", (I64 + I32) * rows + I32 * groups, [ids, ones, counts], [counts],
                       elements=rows)
        offsets = self.untabled("cumsum", 2 * I32 * groups, [counts], [self.buf("offsets")], elements=groups)
        token = self.elementwise("div_index", rows, 2 * I64, [order], [self.buf("token")])
        x_sorted = self.launch(TorchOp("index_select", "gather", elem * 2 * rows * hidden + I64 * rows,
                                       (x, token), (self.buf("x_sorted"),), elements=rows * hidden,
                                       table=TableLookup(table_key("index_select", N=hidden), rows)))
        per_group = max(1, round(rows / max(view.active, 1.0)))
        # measured tables: the routed experts at their mean rows, each fused shared chunk at its rows
        per_routed = view.routed_rows / view.touched
        shared_part = ((view.shared_rows, float(view.chunks)),) if view.chunks else ()
        gate_up = self.launch(TorchOp(
            "grouped_mm_gate_up", "grouped_gemm",
            elem * (rows * hidden + view.active * hidden * 2 * width + rows * 2 * width) + I32 * groups,
            (x_sorted, offsets), (self.buf("gate_up"),), flops=2.0 * rows * hidden * 2 * width,
            gemm=GemmShape(per_group, hidden, 2 * width), groups=view.active,
            table=TableLookup(table_key("grouped_mm", K=hidden, N=2 * width), per_routed, view.touched),
            parts=shared_part, geometry=self.recorded("grouped_mm", hidden, 2 * width, rows, groups)))
        act = self.elementwise("silu", rows * width, 2 * elem, [gate_up], [self.buf("silu")], op_key="act_silu")
        act = self.elementwise("mul", rows * width, 3 * elem, [act, gate_up], [self.buf("act")], op_key="act_mul")
        down = self.launch(TorchOp(
            "grouped_mm_down", "grouped_gemm",
            elem * (rows * width + view.active * width * hidden + rows * hidden) + I32 * groups,
            (act, offsets), (self.buf("down"),), flops=2.0 * rows * width * hidden,
            gemm=GemmShape(per_group, width, hidden), groups=view.active,
            table=TableLookup(table_key("grouped_mm", K=width, N=hidden), per_routed, view.touched),
            parts=shared_part, geometry=self.recorded("grouped_mm", width, hidden, rows, groups)))
        scale = self.untabled("index_select", (2 * F32 + I64) * rows, [weights, order], [self.buf("scale")],
                               elements=rows, family="gather")
        out = self.elementwise("zeros", tokens * hidden, F32, [], [self.buf("combine_f32")])
        down_f32 = self.elementwise("to_float", rows * hidden, elem + F32, [down], [self.buf("down_f32")],
                                    op_key="cast")
        down_f32 = self.elementwise("mul", rows * hidden, 2 * F32 + F32 / hidden, [down_f32, scale],
                                    [self.buf("down_scaled")], op_key="combine_mul")
        self.untabled("index_add", F32 * (rows * hidden + 2 * tokens * hidden) + I64 * rows,
                       [down_f32, token, out], [out], elements=rows * hidden)
        return self.elementwise("to_bf16", tokens * hidden, F32 + elem, [out], [self.buf("routed_out")],
                                op_key="cast")

    def fused_weights(self, x: str, ids: str, weights: str) -> tuple[str, str]:
        """``MoELayer._fused``: append the shared pseudo-experts to the ids and weights."""
        dims, tokens, chunks = self.dims, self.tokens, self.dims.fused_shared_chunks
        if dims.shared_gate:
            gate = self.linear("shared_gate_gemm", x, dims.hidden, 1, self.buf("shared_gate_logit"))
            gate = self.elementwise("to_float", tokens, self.elem_bytes + F32, [gate], [self.buf("shared_gate_f32")],
                                    op_key="cast")
            shared_weight = self.elementwise("sigmoid", tokens, 2 * F32, [gate], [self.buf("shared_weight")])
        else:
            shared_weight = self.elementwise("ones", tokens * chunks, F32, [], [self.buf("shared_weight")])
        picks = tokens * (dims.top_k + chunks)
        all_ids = self.untabled("cat", 2 * I64 * picks, [ids], [self.buf("ids_fused")], elements=picks,
                                 family="gather")
        all_weights = self.untabled("cat", 2 * F32 * picks, [weights, shared_weight], [self.buf("weights_fused")],
                                     elements=picks, family="gather")
        return all_ids, all_weights

    # --- shared path -------------------------------------------------------------------------------
    def shared(self, x: str, width: int, stream: str | None = None) -> str:
        """The shared MLP of intermediate ``width`` (all shared experts, or a TP rank's slice of them)."""
        dims, tokens, elem = self.dims, self.tokens, self.elem_bytes
        gate_up = self.linear("shared_gemm_gate_up", x, dims.hidden, 2 * width, self.buf("shared_gate_up"), stream)
        act = self.elementwise("silu", tokens * width, 2 * elem, [gate_up], [self.buf("shared_silu")], stream,
                               op_key="act_silu")
        act = self.elementwise("mul", tokens * width, 3 * elem, [act, gate_up], [self.buf("shared_act")], stream,
                               op_key="act_mul")
        out = self.linear("shared_gemm_down", act, width, dims.hidden, self.buf("shared_out"), stream)
        if dims.shared_gate:
            gate = self.linear("shared_gate_gemm", x, dims.hidden, 1, self.buf("shared_gate_logit"), stream)
            gate = self.elementwise("sigmoid", tokens, 2 * elem, [gate], [self.buf("shared_gate")], stream)
            out = self.elementwise("mul", tokens * dims.hidden, 2 * elem + elem / dims.hidden, [out, gate],
                                   [self.buf("shared_gated")], stream, op_key="gate_mul")
        return out

    def add(self, a: str, b: str, out: str) -> str:
        return self.elementwise("add", self.tokens * self.dims.hidden, 3 * self.elem_bytes, [a, b], [out],
                                rows_cols=(self.tokens, self.dims.hidden))

    def scale_inplace(self, x: str) -> str:
        """``MoELayer.unsafe_inplace_demo``'s in-place scaling of the input."""
        return self.elementwise("scale_input_inplace", self.tokens * self.dims.hidden, 2 * self.elem_bytes,
                                [x], [x])
