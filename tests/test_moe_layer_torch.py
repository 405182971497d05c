"""The builder's op sequence is kernels_real's: profile the real layer on the CPU (tiny shapes, same
structure) and compare its top-level torch ops with the launches the builder emits, in issue order."""

from __future__ import annotations

import pytest

from simulator.profile import load_profile
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import PRESETS, STRATEGIES

torch = pytest.importorskip("torch")
profiler = pytest.importorskip("torch.profiler")
real_config = pytest.importorskip("kernels_real.config")
real_layer = pytest.importorskip("kernels_real.layer")

# builder launch name -> the aten op kernels_real calls for it
ATEN = {"to_float": "to", "to_bf16": "to", "router_gemm": "linear", "shared_gemm_gate_up": "linear",
        "shared_gemm_down": "linear", "shared_gate_gemm": "linear", "sigmoid": "sigmoid", "add_bias": "add",
        "add": "add", "topk": "topk", "topk_in_groups": "topk", "topk_groups": "topk", "sum": "sum",
        "zeros_like": "zeros_like", "scatter": "scatter_", "expand_copy": "reshape", "eq": "eq",
        "masked_fill": "masked_fill", "gather": "gather", "div": "div", "scale": "mul", "softmax": "softmax",
        "sort": "sort", "ones_like": "ones_like", "zeros": "zeros", "scatter_add": "scatter_add_",
        "cumsum": "cumsum", "div_index": "floor_divide", "index_select": "index_select",
        "grouped_mm_gate_up": "_grouped_mm", "grouped_mm_down": "_grouped_mm", "silu": "silu", "mul": "mul",
        "index_add": "index_add_", "cat": "cat", "ones": "new_ones"}
VIEWS = {"slice", "view", "unsqueeze", "expand", "expand_as", "transpose", "t", "select", "permute",
         "as_strided", "_unsafe_view", "alias", "detach", "reshape"}
WORK_CHILDREN = {"aten::clone", "aten::copy_", "aten::_reshape_copy"}


def _does_work(event) -> bool:
    name = event.name.removeprefix("aten::")
    if name not in VIEWS:
        return True
    stack = list(event.cpu_children)
    while stack:
        child = stack.pop()
        if child.name in WORK_CHILDREN:
            return True
        stack.extend(child.cpu_children)
    return False


def _torch_ops(cfg, strategy: str) -> list[str]:
    layer = real_layer.MoELayer(cfg, "cpu", backend="grouped_mm")
    w = real_layer.MoEWeights.random(cfg, "cpu")
    x = torch.randn(4, cfg.hidden, dtype=torch.bfloat16)
    layer(x, w, strategy)
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        layer(x, w, strategy)
    tops = [e for e in prof.events() if e.name.startswith("aten::")
            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
    tops.sort(key=lambda e: e.time_range.start)
    return [e.name.removeprefix("aten::") for e in tops if _does_work(e)]


@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="this torch has no _grouped_mm on the CPU")
@pytest.mark.parametrize("preset", list(PRESETS))
def test_builder_issues_kernels_real_ops(preset: str) -> None:
    cfg = real_config.get_preset(preset).scaled_down()  # a MoEDims of the one table, as the layer runs it
    profile = load_profile("h200-datasheet")
    for strategy in STRATEGIES:
        if cfg.applicable(strategy):
            continue
        mine = [ATEN[op.kernel] for op in moe_layer_program(cfg, 4, strategy, profile).kernels()]
        assert mine == _torch_ops(cfg, strategy), (preset, strategy)
