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


@pytest.mark.parametrize("op", ["router", "topk", "softmax", "sort", "gather"])
def test_placement_probe_routing_ops_run(op):
    """Each routing step the placement probe can put on the main stream runs on CPU torch with a preset's sizes."""
    from calibration.microbench.placement_probe import routing_op

    step = routing_op(op, 64, 16, 2, torch.Generator().manual_seed(0), torch.float32, device="cpu")
    out = step(0)
    shapes_of = {"router": (2, 16), "softmax": (2, 16), "gather": (16, 64)}
    first = out[0] if isinstance(out, tuple) else out
    if op in shapes_of:
        assert tuple(first.shape) == shapes_of[op]
    elif op == "topk":
        assert tuple(first.shape) == (2, 8)
    else:
        assert tuple(first.shape) == (16,) and bool((first[1:] >= first[:-1]).all())


@pytest.mark.parametrize(("weights", "stored"), [(shapes.GROUPED_WEIGHTS, (4, 8, 16)),
                                                 (shapes.LEGACY_GROUPED_WEIGHTS, (4, 16, 8))])
def test_grouped_gemm_holds_the_layers_expert_layout(weights, stored):
    """The grouped GEMM's experts are stored [E, N, K] and passed transposed, as kernels_real's layer holds them
    (a [E, K, N] tensor, the layout measured before 2026-12-04 and kept for an A/B, runs another kernel layout on
    the GPU); the call gives N outputs per routed row either way."""
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch._grouped_mm not in this torch")
    spec = {"family": "grouped_gemm", "op": "grouped_mm", "tokens": 3, "top_k": 1, "E": 4, "K": 16, "N": 8,
            "counts": [1, 0, 2, 0], "weights": weights, "tag": "t"}
    cache: dict = {}
    try:
        out = ops.build(torch, spec, torch.device("cpu"), 1 << 30, cache)[0]()
    except RuntimeError as err:  # CPU builds without the grouped kernel
        pytest.skip(f"torch._grouped_mm does not run on this CPU build: {err}")
    (tensor,) = [v for key, v in cache.items() if key[0] == "grouped_w"]
    assert tuple(tensor.shape) == stored and out.shape == (3, 8)


def test_grouped_gemm_rows_sit_at_several_addresses():
    """Each routing's rows are copied to ROW_PLACEMENTS addresses, spacers between (kept in the cache), one call
    each; every copy holds the same values."""
    rows = torch.randn(2, 16)
    cache: dict = {}
    placed = ops.row_placements(torch, rows, torch.device("cpu"), cache, rotation=0)
    assert len(placed) == ops.ROW_PLACEMENTS and placed[0] is rows
    assert len({t.data_ptr() for t in placed}) == ops.ROW_PLACEMENTS
    assert all(torch.equal(t, rows) for t in placed)
    assert len(cache) == ops.ROW_PLACEMENTS - 1
    spec = {"family": "grouped_gemm", "op": "grouped_mm", "tokens": 3, "top_k": 1, "E": 4, "K": 16, "N": 8,
            "counts": [1, 0, 2, 0], "weights": shapes.GROUPED_WEIGHTS, "tag": "t"}
    assert len(ops.build(torch, spec, torch.device("cpu"), 1, {})) == ops.ROW_PLACEMENTS  # one routing (L2 of 1 B)
    assert len(ops.build(torch, spec, torch.device("cpu"), 200, {})) == 2 * ops.ROW_PLACEMENTS  # two routings
