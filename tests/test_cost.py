"""The roofline cost model against hand-computed durations and demands."""

from __future__ import annotations

import json

import pytest

from simulator.cost import (
    CostModel,
    KernelSpec,
    elementwise_grid_share,
    gemm_grid_share,
    kernel_cost,
    padded_flops,
    table_key,
    table_time,
)
from simulator.profile import KernelFamily, Profile, load_profile


def _profile(**family: float) -> Profile:
    """h200-datasheet (4800 GB/s, 989 TFLOP/s) with one family ``f`` of the given parameters."""
    doc = json.loads(load_profile("h200-datasheet").model_dump_json())
    doc["kernel_families"]["f"] = {"latency_us": 3.0, "bw_eff": 0.8, "tc_eff": 0.5, "fill_sat": 0.5,
                                   "tile_m": 64, "tile_n": 128, "source": "test", **family}
    return Profile.model_validate(doc)


def test_memory_bound_kernel() -> None:
    p = _profile()
    c = kernel_cost(KernelSpec("k", "f", bytes=1e9, sm=1.0), p)
    t_mem = 1e9 / (4800e3 * 0.8)  # bytes / (bytes per µs × efficiency) = 260.4167 µs
    assert c.dur_us == pytest.approx(3.0 + t_mem)
    assert c.bw == pytest.approx(1e9 / (3.0 + t_mem) / 4800e3)
    assert c.tc == 0 and c.sm == 1.0


def test_compute_bound_kernel_and_tc_demand() -> None:
    p = _profile()
    c = kernel_cost(KernelSpec("k", "f", flops=1e12, bytes=1e6, sm=1.0), p)
    t_cmp = 1e12 / (989e6 * 0.5)  # 2022.245 µs
    assert c.dur_us == pytest.approx(3.0 + t_cmp)
    assert c.tc == pytest.approx(1e12 / c.dur_us / 989e6)


def test_small_grid_reaches_a_share_of_the_peak() -> None:
    p = _profile()
    full = kernel_cost(KernelSpec("k", "f", bytes=1e8, sm=1.0), p).dur_us - 3.0
    quarter = kernel_cost(KernelSpec("k", "f", bytes=1e8, sm=0.125), p).dur_us - 3.0
    # fill_sat 0.5: a grid on 1/8 of the SMs reaches 1/4 of the peak rate
    assert quarter == pytest.approx(4 * full)
    assert kernel_cost(KernelSpec("k", "f", bytes=1e8, sm=0.125), p).sm == 0.125


def test_row_padding_of_gemms() -> None:
    assert padded_flops(100.0, 1, 64) == 6400.0
    assert padded_flops(100.0, 64, 64) == 100.0
    assert padded_flops(100.0, 65, 64) == pytest.approx(100.0 * 128 / 65)
    assert padded_flops(100.0, None, 64) == 100.0


def test_grid_shares() -> None:
    fam = KernelFamily(latency_us=0, bw_eff=1, tc_eff=1, tile_m=64, tile_n=128, elems_per_block=1024,
                       source="t")
    assert gemm_grid_share(64, 1280, fam, 132) == pytest.approx(10 / 132)
    assert gemm_grid_share(1000, 4096, fam, 132) == 1.0  # 16 × 32 tiles
    assert gemm_grid_share(3, 128, fam, 100, groups=7) == pytest.approx(7 / 100)
    split = fam.model_copy(update={"split_k_depth": 512})
    # 2 output tiles, K = 7168 → up to 14 splits of 512, capped by ceil(132 / 2) = 66 → 28 blocks
    assert gemm_grid_share(64, 256, split, 132, depth=7168) == pytest.approx(28 / 132)
    assert elementwise_grid_share(10 * 1024, fam, 100) == pytest.approx(0.1)
    assert elementwise_grid_share(1, fam, 100) == pytest.approx(0.01)


def test_cost_model_launch() -> None:
    p = _profile()
    op = CostModel(p).launch(KernelSpec("k", "f", bytes=1e9, reads=("a",), writes=("b",)), "main", "r")
    assert op.stream == "main" and op.family == "f" and op.region == "r"
    assert op.reads == ("a",) and op.writes == ("b",)
    assert 0 < op.bw <= 1 and op.dur_us > 260


def test_table_time_log_log() -> None:
    pts = [(1.0, 10.0), (4.0, 20.0), (16.0, 80.0)]
    assert table_time(pts, 4.0) == pytest.approx(20.0)
    assert table_time(pts, 2.0) == pytest.approx(10.0 * 2**0.5)  # slope ½ between 1 and 4: 10·2^½
    assert table_time(pts, 8.0) == pytest.approx(40.0)  # slope 1 between 4 and 16
    assert table_time(pts, 64.0) == pytest.approx(320.0)  # beyond: the end slope (1)
    assert table_time(pts, 0.25) == pytest.approx(10.0 / 2)  # below: the first slope (½)
    assert table_time([(1.0, 5.0), (2.0, 4.0)], 8.0) == pytest.approx(4.0)  # a falling end: flat outside
    assert table_time([(1.0, 1.0), (2.0, 8.0)], 4.0) == pytest.approx(16.0)  # a steep end: at most linear
    assert table_time([(3.0, 7.0)], 100.0) == 7.0


def test_table_and_op_family_precedence() -> None:
    doc = json.loads(_profile().model_dump_json())
    doc["kernel_tables"] = {table_key("mm", K=8, N=4): {"x": "M", "points": [[1, 5.0], [4, 10.0]], "source": "t"}}
    doc["kernel_families"]["op:thing"] = {"latency_us": 7.0, "bw_eff": 1.0, "tc_eff": 1.0, "kernels": 2, "source": "t"}
    p = Profile.model_validate(doc)
    assert table_key("mm", N=4, K=8) == "mm K=8 N=4"
    spec = KernelSpec("k", "f", bytes=0.0, table="mm K=8 N=4", x=4, count=3.0, op_key="thing")
    assert kernel_cost(spec, p).dur_us == pytest.approx(30.0)  # the table wins, × count
    assert kernel_cost(spec, p).kernels == 1  # a measured table holds its kernels' gaps already
    parts = KernelSpec("k", "f", table="mm K=8 N=4", x=4, count=3.0, parts=((1.0, 2.0),))
    assert kernel_cost(parts, p).dur_us == pytest.approx(30.0 + 2 * 5.0)  # + each further (x, count)
    no_table = KernelSpec("k", "f", bytes=0.0, table="mm K=9 N=4", x=4, op_key="thing")
    assert kernel_cost(no_table, p).dur_us == pytest.approx(7.0)  # then the op's own family
    assert kernel_cost(no_table, p).kernels == 2  # with its traced kernel count
    assert kernel_cost(KernelSpec("k", "f", bytes=0.0, op_key="other"), p).dur_us == pytest.approx(3.0)


def test_an_op_never_traced_takes_the_family_of_an_op_of_the_same_torch_call() -> None:
    """DeepSeek-V3's in-group top-k is a sorted ``torch.topk`` like the routers': without its own fitted family
    it takes theirs (7 µs), not the kernel class's (3 µs); with its own, its own (5 µs). An op of another call
    (``softmax``) never borrows it."""
    doc = json.loads(_profile().model_dump_json())
    fam = {"bw_eff": 1.0, "tc_eff": 1.0, "kernels": 2, "source": "t"}
    doc["kernel_families"]["op:topk"] = {"latency_us": 7.0, **fam}
    borrowed = Profile.model_validate(doc)
    doc["kernel_families"]["op:topk_in_groups"] = {"latency_us": 5.0, **fam}
    own = Profile.model_validate(doc)
    spec = KernelSpec("topk_in_groups", "f", bytes=0.0, op_key="topk_in_groups")
    assert kernel_cost(spec, borrowed).dur_us == pytest.approx(7.0)
    assert kernel_cost(spec, own).dur_us == pytest.approx(5.0)
    assert kernel_cost(KernelSpec("softmax", "f", bytes=0.0, op_key="softmax"), own).dur_us == pytest.approx(3.0)


def test_resident_share() -> None:
    rows = _profile(resident="rows")
    assert kernel_cost(KernelSpec("k", "f", bytes=1e6, sm=1.0, rows=16), rows).sm == pytest.approx(16 / 64)
    assert kernel_cost(KernelSpec("k", "f", bytes=1e6, sm=0.5, rows=640), rows).sm == pytest.approx(0.5)
    full = _profile(resident="full")
    assert kernel_cost(KernelSpec("k", "f", bytes=1e6, sm=0.1), full).sm == 1.0
    assert kernel_cost(KernelSpec("k", "f", bytes=1e6, sm=0.1, rows=1), _profile()).sm == pytest.approx(0.1)


def test_router_gemm_is_costed_by_its_kernel_regime() -> None:
    """cuBLAS runs the one-row fp32 router GEMM as a GEMV: a 1-token layer's router takes the ``router_gemv``
    family, every other token count ``router_gemm``; a profile without the GEMV family falls back."""
    from simulator.workloads.builder import ProgramBuilder
    from simulator.workloads.moe_layer import emit_moe_layer
    from simulator.workloads.presets import get_preset
    from simulator.workloads.torch_ops import router_op_key

    assert [router_op_key(m) for m in (1, 2, 16)] == ["router_gemv", "router_gemm", "router_gemm"]
    doc = json.loads(_profile().model_dump_json())
    full_reach = {"bw_eff": 1.0, "tc_eff": 1.0, "fill_sat": 0.01, "source": "t"}  # memory-bound at any grid
    doc["kernel_families"]["op:router_gemv"] = {"latency_us": 2.0, **full_reach}
    doc["kernel_families"]["op:router_gemm"] = {"latency_us": 9.0, **full_reach}
    both = Profile.model_validate(doc)
    del doc["kernel_families"]["op:router_gemv"]
    gemm_only = Profile.model_validate(doc)
    dims = get_preset("deepseek_v3")
    expected_bytes = {m: 4 * (m * dims.hidden + dims.hidden * dims.n_experts + m * dims.n_experts) for m in (1, 2)}

    def router_us(profile: Profile, tokens: int) -> float:
        b = ProgramBuilder(cost=CostModel(profile))
        emit_moe_layer(b, dims, tokens, "sequential")
        launch = next(op for op in b.build().ops if getattr(op, "kernel", "") == "router_gemm")
        return launch.dur_us

    hbm = both.hbm_bytes_per_us
    assert router_us(both, 1) == pytest.approx(2.0 + expected_bytes[1] / hbm)
    assert router_us(both, 2) == pytest.approx(9.0 + expected_bytes[2] / hbm)
    assert router_us(gemm_only, 1) > router_us(both, 1)  # no GEMV family: the generic fp32 GEMM family


def test_table_lookup_past_its_end_is_no_faster_than_the_tensor_ceiling() -> None:
    """A table measured to 32 rows of a memory-bound GEMM (flat end): 1024 rows of K=N=4096 take at least
    1024 × 2 × 4096² flops at the ceiling; inside the measured range the table stands as measured."""
    doc = json.loads(_profile().model_dump_json())
    doc["kernel_tables"] = {"g": {"x": "rows", "points": [[1, 10.0], [32, 10.0]], "source": "t"}}
    p = Profile.model_validate(doc)
    per_row = 2.0 * 4096 * 4096
    floor = 1024 * per_row / p.tensor_flops_per_us
    assert floor > 10.0
    spec = KernelSpec("k", "f", table="g", x=1024, flops_per_x=per_row)
    assert kernel_cost(spec, p).dur_us == pytest.approx(floor)
    assert kernel_cost(KernelSpec("k", "f", table="g", x=32, flops_per_x=per_row), p).dur_us == pytest.approx(10.0)
    assert kernel_cost(KernelSpec("k", "f", table="g", x=1024), p).dur_us == pytest.approx(10.0)  # no flops given
    parts = KernelSpec("k", "f", table="g", x=32, count=2.0, parts=((1024, 1.0),), flops_per_x=per_row)
    assert kernel_cost(parts, p).dur_us == pytest.approx(2 * 10.0 + floor)  # each lookup bounded on its own


def _carried_table_profile(there_bw_eff: float) -> Profile:
    """``_profile()`` (family ``f`` streams at 0.8 × 4800 = 3840 GB/s) with one measured table of 10 µs at x=1,
    measured on a GPU of 9600 GB/s whose family ``f`` streams at ``there_bw_eff`` of it."""
    doc = json.loads(_profile().model_dump_json())
    doc["kernel_tables"] = {"t": {"x": "M", "points": [[1, 10.0]], "source": "t"}}
    there = {**doc["kernel_families"]["f"], "bw_eff": there_bw_eff}
    doc["kernel_tables_from"] = {"gpu": "twin", "hbm_GBps": 9600, "bf16_tflops": 989,
                                 "families": {"f": there, "default": there}, "source": "test"}
    return Profile.model_validate(doc)


def test_a_carried_table_moves_its_streaming_share_to_this_gpu() -> None:
    # 23.04 MB: 3 µs at 7680 GB/s there (of the 10 µs measured); 6 µs at 3840 GB/s here: 10 + 3 × (6/3 - 1) = 13
    spec = KernelSpec("k", "f", bytes=23.04e6, sm=1.0, table="t", x=1)
    assert kernel_cost(spec, _carried_table_profile(0.8)).dur_us == pytest.approx(13.0)
    # a family whose rate does not change (its pipeline, not the HBM, bounds it) keeps the measured time
    assert kernel_cost(spec, _carried_table_profile(0.4)).dur_us == pytest.approx(10.0)
    # a roofline longer than the measured time: all of it is streaming, scaled by the ratio (10 × 2)
    big = KernelSpec("k", "f", bytes=115.2e6, sm=1.0, table="t", x=1)
    assert kernel_cost(big, _carried_table_profile(0.8)).dur_us == pytest.approx(20.0)
    # nothing to stream: the measured time
    assert kernel_cost(KernelSpec("k", "f", table="t", x=1), _carried_table_profile(0.8)).dur_us == 10.0


def _shard_law_profile() -> Profile:
    """A whole-expert grouped table (K=256, N=1024: 20 µs per expert at any rows, 5 µs fixed) and a shard law of
    10 µs per kernel, 1 µs per round of 4 tiles (64 × 128), 1000 GB/s."""
    doc = json.loads(_profile().model_dump_json())
    doc["kernel_tables"] = {table_key("grouped_mm", K=256, N=1024): {
        "x": "rows per expert", "points": [[1, 20.0], [64, 20.0]], "fixed_us": 5.0, "source": "t"}}
    doc["grouped_shard_law"] = {"fixed_us": 10.0, "round_us": 1.0, "stream_GBps": 1000.0, "tile_m": 64,
                                "tile_n": 128, "slots": 4, "source": "t"}
    return Profile.model_validate(doc)


def test_grouped_shard_law_by_hand() -> None:
    law = _shard_law_profile().grouped_shard_law
    assert law is not None
    # 3 experts of 1 row, N=1024: 3 × 8 tiles = 24 tiles / 4 slots = 6 rounds; weights 3 × 256 × 1024 × 2 B
    weights_us = 3 * 256 * 1024 * 2 / 1e6  # 1000 GB/s = 1e6 B/µs
    assert law.time_us(256, 1024, ((1.0, 3.0),)) == pytest.approx(10.0 + 6 * 1.0 + weights_us)
    # 65 rows take two row tiles each: 48 tiles, 12 rounds
    assert law.time_us(256, 1024, ((65.0, 3.0),)) == pytest.approx(10.0 + 12 * 1.0 + weights_us)


def test_a_shape_without_a_table_takes_the_whole_expert_table_scaled_by_the_law() -> None:
    p = _shard_law_profile()
    law = p.grouped_shard_law
    assert law is not None
    whole = 5.0 + 3 * 20.0  # the table's time for 3 experts of 1 row
    for shard in (table_key("grouped_mm", K=256, N=256), table_key("grouped_mm", K=64, N=1024)):  # gate_up, down
        spec = KernelSpec("grouped_mm_gate_up", "grouped_gemm", bytes=1e6, table=shard, x=1.0, count=3.0)
        k, n = (int(v.split("=")[1]) for v in shard.split()[1:])
        ratio = law.time_us(k, n, ((1.0, 3.0),)) / law.time_us(256, 1024, ((1.0, 3.0),))
        assert ratio < 1
        assert kernel_cost(spec, p).dur_us == pytest.approx(whole * ratio)
        assert kernel_cost(spec, p).kernels == 1
    # no whole-expert table (N=384 is no fraction of a measured shape): the law's own time
    odd = KernelSpec("g", "grouped_gemm", bytes=1e6, table=table_key("grouped_mm", K=256, N=384), x=1.0, count=3.0)
    assert kernel_cost(odd, p).dur_us == pytest.approx(law.time_us(256, 384, ((1.0, 3.0),)))
    # no law: the family roofline, as before
    spec = KernelSpec("g", "grouped_gemm", bytes=1e6, table=table_key("grouped_mm", K=256, N=512), x=1.0, count=3.0)
    doc = json.loads(p.model_dump_json())
    doc["grouped_shard_law"] = None
    assert kernel_cost(spec, Profile.model_validate(doc)).dur_us == pytest.approx(kernel_cost(spec, _profile()).dur_us)
