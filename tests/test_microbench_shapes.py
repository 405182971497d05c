"""Shape lists and routing of the microbenchmarks (pure, CPU)."""

from __future__ import annotations

from calibration.microbench import shapes


def test_route_counts_conserve_rows_and_respect_distinct_experts():
    counts = shapes.route_counts(tokens=37, experts=16, top_k=4, seed=3)
    assert len(counts) == 16
    assert sum(counts) == 37 * 4
    assert max(counts) <= 37  # each token picks an expert at most once


def test_route_counts_single_token_hits_exactly_top_k_experts():
    counts = shapes.route_counts(tokens=1, experts=256, top_k=8)
    assert sorted(set(counts)) == [0, 1]
    assert sum(counts) == 8


def test_route_counts_seeded_and_seed_sensitive():
    assert shapes.route_counts(4, 64, 8, seed=1) == shapes.route_counts(4, 64, 8, seed=1)
    assert shapes.route_counts(4, 64, 8, seed=1) != shapes.route_counts(4, 64, 8, seed=2)


def test_gemm_kn_of_qwen2_has_shared_expert_and_gate():
    qw = shapes.PRESET_BY_NAME["Qwen2-57B-A14B"]
    kn = {role: (k, n) for role, k, n in shapes.gemm_kn(qw)}
    assert kn["gate_up"] == (3584, 5120)
    assert kn["down"] == (2560, 3584)
    assert kn["router"] == (3584, 64)
    assert kn["shared_gate_up"] == (3584, 40960)
    assert kn["shared_down"] == (20480, 3584)
    assert kn["shared_gate"] == (3584, 1)


def test_qwen3_has_no_shared_gemms():
    roles = [r for r, _, _ in shapes.gemm_kn(shapes.PRESET_BY_NAME["Qwen3-30B-A3B"])]
    assert roles == ["gate_up", "down", "router"]


def test_full_solo_list_covers_every_family_token_count_and_preset_shape():
    specs = shapes.solo_specs()
    fams = {s["family"] for s in specs}
    assert fams == {"gemm", "grouped_gemm", "elementwise", "topk", "sort", "reduction", "gather", "copy"}
    gemm_m = {s["M"] for s in specs if s["family"] == "gemm"}
    assert gemm_m == {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
    kn = {(s["K"], s["N"]) for s in specs if s["family"] == "gemm"}
    for p in shapes.PRESETS:
        for _, k, n in shapes.gemm_kn(p):
            assert (k, n) in kn
    grouped = {(s["tag"], s["tokens"]) for s in specs if s["family"] == "grouped_gemm"}
    assert len(grouped) == len(shapes.PRESETS) * 2 * 11
    keys = [repr(sorted(s.items())) for s in specs]
    assert len(keys) == len(set(keys))


def test_coarse_pass_comes_first_so_a_budget_cut_keeps_every_family():
    specs = shapes.solo_specs()
    first_fine = next(i for i, s in enumerate(specs) if s["family"] == "gemm" and s["M"] not in (1, 16, 128, 1024))
    assert first_fine < len(specs) // 2
    assert {s["family"] for s in specs[:first_fine]} == {s["family"] for s in specs}


def test_quick_list_is_small():
    assert len(shapes.solo_specs(quick=True)) < 80
    assert len(shapes.corun_pairs(quick=True)) <= 6


def test_corun_pairs_cover_the_requested_kinds():
    pairs = shapes.corun_pairs()
    gated = [p for p in pairs if not p["staggered"]]
    assert 15 <= len(gated) <= 30
    assert {p["kind"] for p in gated} == {"moe_routed_x_shared", "moe_grouped_x_shared", "mem_x_mem",
                                          "mem_x_compute", "small_x_large"}
    assert pairs[len(gated):] == shapes.routing_pairs()  # the staggered routing pairs come last


def test_routing_specs_of_qwen2_at_16_tokens():
    qw = shapes.PRESET_BY_NAME["Qwen2-57B-A14B"]
    specs = {s["op"]: s for s in shapes.routing_specs(qw, 16)}
    assert list(specs) == ["mm_f32", "softmax", "topk", "sort", "scatter_add", "cumsum", "index_select", "chain",
                           "index_add"]
    assert (specs["mm_f32"]["M"], specs["mm_f32"]["K"], specs["mm_f32"]["N"]) == (16, 3584, 64)
    assert (specs["softmax"]["M"], specs["softmax"]["E"]) == (16, 64)
    assert specs["topk"]["k"] == 8 and specs["topk"]["sorted"] is True
    assert specs["sort"]["n"] == 128 and specs["scatter_add"]["n"] == 128  # 16 tokens x top-8
    assert specs["cumsum"]["E"] == 64
    assert (specs["index_select"]["M"], specs["index_select"]["k"], specs["index_select"]["N"]) == (16, 8, 3584)
    assert [(s["op"], s["M"], s["N"]) for s in specs["chain"]["ops"]] == [("silu_half", 128, 2560),
                                                                         ("mul_half", 128, 2560)]
    assert {s["family"] for s in specs.values() if s["op"] != "chain"} == {
        "op:router_gemm", "op:softmax", "op:topk", "op:sort", "op:scatter_add", "op:cumsum", "op:index_select",
        "op:index_add"}


def test_deepseek_routing_scores_with_sigmoid():
    ops = [s["op"] for s in shapes.routing_specs(shapes.PRESET_BY_NAME["DeepSeek-V3"], 1)]
    assert "sigmoid" in ops and "softmax" not in ops


def test_routing_pairs_cross_every_routing_kernel_with_seven_partners():
    pairs = shapes.routing_pairs()
    assert len(pairs) == 7 * 9  # Qwen2 shared@1, @16, V3 shared@1, grouped of both presets @1, @16
    assert all(p["staggered"] for p in pairs)
    partners = {(p["kind"], p["b"]["tag"], p["b"].get("M", p["b"].get("tokens"))) for p in pairs}
    assert partners == {
        ("routing_x_shared", "Qwen2-57B-A14B:shared_gate_up", 1), ("routing_x_shared",
                                                                   "Qwen2-57B-A14B:shared_gate_up", 16),
        ("routing_x_shared", "DeepSeek-V3:shared_gate_up", 1),
        ("routing_x_grouped", "Qwen2-57B-A14B:gate_up", 1), ("routing_x_grouped", "Qwen2-57B-A14B:gate_up", 16),
        ("routing_x_grouped", "DeepSeek-V3:gate_up", 1), ("routing_x_grouped", "DeepSeek-V3:gate_up", 16)}
    for p in pairs:  # the routing kernel runs at the partner's token count and preset
        a, b = p["a"], p["b"]
        tokens = b.get("tokens", b.get("M"))
        assert a["tag"].split(":")[0] == f"{b['tag'].split(':')[0]}@{tokens}"
    qw_up16 = next(p["b"] for p in pairs if p["b"]["op"] == "mm" and p["b"]["M"] == 16)
    assert (qw_up16["K"], qw_up16["N"]) == (3584, 2 * 20480)


def test_moe_sides_are_the_expert_chains():
    routed, shared = shapes.moe_sides(shapes.PRESET_BY_NAME["Qwen2-57B-A14B"], 2)
    assert [s["op"] for s in routed["ops"]] == ["grouped_mm", "silu", "mul", "grouped_mm"]
    assert [s["op"] for s in shared["ops"]] == ["mm", "silu", "mul", "mm", "mm", "mul"]
    assert routed["ops"][1]["M"] == 2 * 8  # tokens x top-k rows
    assert shared["ops"][0]["N"] == 2 * 20480
