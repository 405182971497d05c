"""Which torch function launches each op of the MoE layer builder in ``kernels_real`` (the names
``kernels_real.host_costs`` clocks them by).

Two builder ops that call the same torch function run the same kernels (DeepSeek-V3's top-2 within each expert
group and a router's top-k are both a sorted ``torch.topk``), so an op whose own per-op family was never fitted
takes one fitted to another op of its call (:func:`sibling_ops`; ``simulator.cost.kernel_cost``). The host-cost
fit matches the builder's launches to the clocked torch calls by it (``calibration.fit_host``)."""

from __future__ import annotations

# builder op name -> the torch functions that launch it in kernels_real
CALLS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("shared_gemm_gate_up", "shared_gemm_down", "shared_gate_gemm", "router_gemm"), ("linear",)),
    "silu": ("silu",),
    "mul": ("Tensor.mul", "Tensor.__mul__"),
    "scale": ("Tensor.mul", "Tensor.__mul__"),
    "to_float": ("Tensor.float",),
    "to_bf16": ("Tensor.to",),
    "softmax": ("softmax",),
    **dict.fromkeys(("topk", "topk_in_groups", "topk_groups"), ("topk", "Tensor.topk")),
    "sigmoid": ("sigmoid",),
    "add_bias": ("Tensor.add", "Tensor.__add__"),
    "add": ("Tensor.add", "Tensor.__add__"),
    "sum": ("Tensor.sum",),
    "div": ("Tensor.div", "Tensor.__truediv__"),
    "zeros_like": ("zeros_like",),
    "scatter": ("Tensor.scatter_",),
    "expand_copy": ("Tensor.reshape",),
    "eq": ("Tensor.__eq__",),
    "masked_fill": ("Tensor.masked_fill",),
    "gather": ("Tensor.gather",),
    "sort": ("sort",),
    "ones_like": ("ones_like",),
    "ones": ("Tensor.new_ones",),
    "zeros": ("zeros",),
    "scatter_add": ("Tensor.scatter_add_",),
    "cumsum": ("cumsum",),
    "div_index": ("Tensor.__floordiv__",),
    "index_select": ("Tensor.index_select",),
    **dict.fromkeys(("grouped_mm_gate_up", "grouped_mm_down"), ("_grouped_mm",)),
    "index_add": ("Tensor.index_add_",),
    "cat": ("cat",),
}


# a GEMM's kernel follows its dtype and shape, not its torch call (the bf16 shared experts' and the fp32
# router's ``linear`` run different kernels): GEMMs are costed by their measured tables, never by a sibling
_GEMM_CALLS = (("linear",), ("_grouped_mm",))


_SIBLINGS: dict[str, tuple[str, ...]] = {
    op: () if calls in _GEMM_CALLS else tuple(other for other, its in CALLS.items() if its == calls and other != op)
    for op, calls in CALLS.items()}


def sibling_ops(op: str) -> tuple[str, ...]:
    """The other builder ops that call ``op``'s torch function, so run its kernels (none for an op not listed,
    and none for a GEMM)."""
    return _SIBLINGS.get(op, ())
