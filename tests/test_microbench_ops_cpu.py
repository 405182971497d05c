"""The routing-kernel specs build and run on CPU torch (each callable issues the spec's op on its shapes)."""

from __future__ import annotations

import pytest

from calibration.microbench import ops, shapes

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("preset", ["Qwen2-57B-A14B", "DeepSeek-V3"])
def test_routing_specs_build_and_give_the_layer_shapes(preset):
    p = shapes.PRESET_BY_NAME[preset]
    outs = {}
    for spec in shapes.routing_specs(p, 2):
        calls = ops.build(torch, spec, torch.device("cpu"), 1 << 20, {})
        assert calls
        outs[spec["op"]] = calls[-1]()
    assert outs["mm_f32"].shape == (2, p.experts) and outs["mm_f32"].dtype == torch.float32
    assert outs[p.score].shape == (2, p.experts)
    assert outs["topk"][1].shape == (2, p.top_k)
    assert torch.all(outs["topk"][0][:, :-1] >= outs["topk"][0][:, 1:])  # sorted, as the layer asks
    assert outs["sort"][0].shape == (2 * p.top_k,) and int(outs["sort"][0].max()) < p.experts
    assert outs["scatter_add"].shape == (p.experts,) and int(outs["scatter_add"].sum()) == 2 * p.top_k  # one per pick
    assert outs["cumsum"].dtype == torch.int32
    assert outs["index_select"].shape == (2 * p.top_k, p.hidden)
    assert [t.shape for t in outs["chain"]] == [(2 * p.top_k, p.moe_inter)] * 2
    assert outs["index_add"].shape == (2, p.hidden) and outs["index_add"].dtype == torch.float32
