"""The decode-step model: expert views and collective times by hand, block structure, legality, composition."""

from __future__ import annotations

import json
import math

import pytest

from simulator.cost import CostModel
from simulator.evaluate import (
    attention_block_us,
    block_time,
    dense_block_us,
    evaluate,
    head_us,
    moe_block,
    moe_block_us,
    moe_program,
    step_case,
)
from simulator.expand import expand
from simulator.hazards import find_hazards
from simulator.ir import Launch
from simulator.profile import load_profile
from simulator.scenario import parse_scenario
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.collectives import COMM_SM, LinkFigures, all_reduce_us, all_to_all_us
from simulator.workloads.decode_step import emit_moe_block, graph_program
from simulator.workloads.layout import ExpertView, Parallelism, grid_touched_experts, touched_experts
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset

DSV3 = get_preset("deepseek_v3")
QWEN2 = get_preset("qwen2_57b_a14b")
PROFILE = load_profile("h200-datasheet")
H200 = load_profile("h200")


def _scenario(tp: int = 1, dp: int = 8, ep: int = 8, concurrency: int = 4, preset: str = "DeepSeek-V3",
              dbo: bool = False, profile: str = "h200-datasheet"):
    return parse_scenario({"model": {"preset": preset}, "platform": {"profile": profile},
                           "parallelism": {"tp": tp, "dp": dp, "ep": ep}, "load": {"concurrency": concurrency},
                           "strategies": {"dbo": [False, dbo] if dbo else [False]}})


def test_expert_view_dp_ep_by_hand() -> None:
    # Qwen2-57B (softmax router: uniform picks), DP4 EP4, one token per rank: 4 distinct tokens, each with
    # 8 of 64 experts; a rank holds 16 experts, each hit by a token with probability 8/64.
    v = ExpertView.of_rank(QWEN2, Parallelism(1, 4, 4), 4, fused=False)
    assert v.rows == 8 and v.routed_rows == pytest.approx(8.0)  # 4 tokens × 8 picks / 4 ranks
    assert v.touched == pytest.approx(16 * (1 - (1 - 8 / 64) ** 4))
    assert (v.groups, v.intermediate, v.chunks) == (16, 2560, 0)


def test_expert_view_takes_the_biased_router_count_and_a_rank_share_of_it() -> None:
    # DeepSeek-V3's grouped_sigmoid router (kernels_real's random bias) hits fewer experts than uniform picks;
    # a DP8 EP8 rank holds an eighth of those hit by all 64 tokens.
    v = ExpertView.of_rank(DSV3, Parallelism(1, 8, 8), 64, fused=False)
    assert v.rows == 64  # 64 tokens × 8 picks / 8 ranks
    assert v.touched == pytest.approx(touched_experts(DSV3, 64) / 8)
    assert v.touched < 32 * (1 - (1 - 8 / 256) ** 64) - 1  # uniform would hit ~27.9 of the rank's 32


def test_expert_view_tp_and_fused_by_hand() -> None:
    v = ExpertView.of_rank(QWEN2, Parallelism(8, 1, 1), 4, fused=False)  # plain TP8: all experts, width 2560 / 8
    assert (v.rows, v.groups, v.intermediate) == (32, 64, 320)
    assert v.touched == pytest.approx(64 * (1 - (1 - 8 / 64) ** 4))
    # TP4 EP4, 64 tokens, Qwen2's 20480-wide shared expert fused as 8 chunks of 2560, one replica per rank:
    # 64·8/4 routed rows, and 8 chunks of 64/4 rows each.
    f = ExpertView.of_rank(QWEN2, Parallelism(4, 1, 4), 64, fused=True)
    assert (f.chunks, f.shared_rows, f.groups) == (8, 16.0, 16 + 8)
    assert f.rows == 64 * 8 // 4 + 8 * 16
    assert f.active == pytest.approx(16 * (1 - (1 - 8 / 64) ** 64) + 8)


def test_expert_view_never_touches_more_experts_than_rows() -> None:
    v = ExpertView.of_rank(DSV3, Parallelism(8, 1, 8), 1, fused=False)  # one token: 8 picks over 8 ranks
    assert v.rows == 1 and v.touched == pytest.approx(1.0)


def test_collective_times_by_hand() -> None:
    link = LinkFigures(bandwidth_GBps=100.0, latency_us=5.0)  # 100 GB/s = 1e5 bytes per µs
    assert all_reduce_us(link, 8, 1e6) == pytest.approx(5 + 2 * 7 / 8 * 10)
    assert all_to_all_us(link, 8, 1e6) == pytest.approx(5 + 7 / 8 * 10)
    assert all_reduce_us(link, 1, 1e6) == 0.0 == all_to_all_us(link, 1, 1e6)


def test_parallelism_checks() -> None:
    assert Parallelism(1, 8, 8).check(DSV3) is None
    assert "ep = tp × dp" in (Parallelism(1, 8, 4).check(DSV3) or "")
    assert "does not divide" in (Parallelism(8, 1, 3).check(DSV3) or "")


def _launches(program) -> list[Launch]:
    return list(program.kernels())


def test_dp_ep_block_dispatches_and_combines_on_main_with_shared_on_aux() -> None:
    case = step_case(_scenario())
    program = moe_program(case, "multi_stream", 1)
    by_name = {k.kernel: k for k in _launches(program)}
    assert by_name["dispatch"].stream == by_name["combine"].stream == "main"
    assert by_name["dispatch"].sm == COMM_SM and by_name["dispatch"].tc == 0
    assert {k.stream for k in _launches(program) if k.kernel.startswith("shared_")} == {"aux"}
    assert "all_reduce" not in by_name  # tp = 1


def test_collectives_sit_between_the_right_torch_ops() -> None:
    """TP2 × DP4, EP8: the dispatch reads the input after the gate and feeds the grouped GEMMs' gather, the
    combine follows the routed output, the add reads it, and the all-reduce comes last."""
    builder = ProgramBuilder(cost=CostModel(PROFILE))
    link = LinkFigures(bandwidth_GBps=100.0, latency_us=5.0)
    outs = emit_moe_block(builder, DSV3, Parallelism(2, 4, 8), link, 4, 16, "multi_stream")
    launches = [op for op in builder.ops if isinstance(op, Launch)]
    main = [op.kernel for op in launches if op.stream == "main"]
    assert main.index("topk") < main.index("dispatch") < main.index("grouped_mm_gate_up")
    assert main.index("to_bf16") < main.index("combine") < main.index("add") < main.index("all_reduce")
    gather = next(op for op in launches if op.kernel == "index_select")
    assert gather.reads[0] == "moe.ub0.x.dispatch"
    assert next(op for op in launches if op.kernel == "add").reads[0] == "moe.ub0.routed_out.combine"
    assert outs == ["moe.ub0.out.all_reduce"]
    assert find_hazards(builder.build()) == []


def test_tp_block_all_reduces_and_never_dispatches() -> None:
    names = [k.kernel for k in _launches(moe_program(step_case(_scenario(8, 1, 8)), "sequential", 1))]
    assert names[-1] == "all_reduce" and "dispatch" not in names


def test_dbo_moves_collectives_to_a_comm_stream() -> None:
    program = moe_program(step_case(_scenario(concurrency=8)), "multi_stream", 2)
    comm = {k.stream for k in _launches(program) if k.kernel in ("dispatch", "combine")}
    assert comm == {"comm"}
    assert sum(k.kernel == "dispatch" for k in _launches(program)) == 2


@pytest.mark.parametrize("layout", [(1, 8, 8), (8, 1, 8), (8, 1, 1)])
@pytest.mark.parametrize("strategy", ["sequential", "multi_stream", "fused_shared"])
@pytest.mark.parametrize("micro", [1, 2])
def test_blocks_are_race_free_and_capturable(layout: tuple[int, int, int], strategy: str, micro: int) -> None:
    program = moe_program(step_case(_scenario(*layout, concurrency=8)), strategy, micro, with_attention=True)
    assert find_hazards(program) == []
    assert expand(program).capture_errors == []


def test_block_time_of_one_kernel_is_its_duration_plus_a_node_gap() -> None:
    launch = Launch(kernel="k", stream="main", dur_us=42.0, sm=0.5, bw=0.5)
    program = graph_program("one", PROFILE, lambda b: b.launch(launch))
    assert block_time(program, PROFILE)[0] == pytest.approx(42.0 + PROFILE.host.node_gap_us.value)


def test_block_time_ignores_host_time_spent_during_capture() -> None:
    """Stream switches inside a capture cost host time then (they are not captured), not in the replay: a
    fork onto aux and back, kernels 42 µs (main) and 30 µs (aux) from the fork: the block is the longer
    branch plus one node gap, whatever a stream switch costs."""
    def emit(b) -> None:
        b.stream("aux")
        b.record("fork")
        with b.using("aux"):
            b.wait("fork")
            b.launch(Launch(kernel="side", stream="aux", dur_us=30.0, sm=0.1, bw=0.1))
            b.record("join")
        b.launch(Launch(kernel="main", stream="main", dur_us=42.0, sm=0.1, bw=0.1))
        b.wait("join")

    expected = 42.0 + PROFILE.host.node_gap_us.value
    for switch_us in (0.0, 25.0):
        costly = PROFILE.model_copy(update={"host": PROFILE.host.model_copy(
            update={"set_stream_us": PROFILE.host.set_stream_us.model_copy(update={"value": switch_us})})})
        program = graph_program("fork", costly, emit)
        assert sum(op.op == "set_stream" for op in program.ops) == 2
        assert block_time(program, costly)[0] == pytest.approx(expected)


def test_layer_is_attention_block_plus_moe_block() -> None:
    case = step_case(_scenario(concurrency=16))
    whole = block_time(moe_program(case, "multi_stream", 1, with_attention=True), PROFILE)[0]
    assert whole == pytest.approx(attention_block_us(case) + moe_block_us(case, "multi_stream", 1), rel=1e-9)


def test_step_composes_the_blocks() -> None:
    scenario = _scenario(concurrency=16)
    ev = evaluate(scenario)
    case = ev.case
    seq = ev.result("sequential")
    expected = (PROFILE.host.replay_us.value + head_us(case) + 61 * attention_block_us(case)
                + 3 * dense_block_us(case) + 58 * moe_block_us(case, "sequential", 1))
    assert seq.step_us == pytest.approx(expected)
    assert seq.gain_vs_sequential == 0.0
    ms = ev.result("multi_stream")
    assert ms.gain_vs_sequential == pytest.approx((seq.step_us - ms.step_us) / seq.step_us)


def test_the_step_pays_the_first_fork_once_and_only_where_the_block_forks(tmp_path) -> None:
    """A profile whose multi-stream replay loses 7 µs at its first fork: multi_stream's step = the blocks' sum
    (each block of the step graph costed without it) + 7 µs once; sequential (one stream) pays nothing."""
    doc = json.loads(PROFILE.model_dump_json())
    doc["host"]["graph_first_fork_us"] = {"value": 7.0, "source": "test"}
    path = tmp_path / "forky.json"
    path.write_text(json.dumps(doc))
    plain, forky = evaluate(_scenario(concurrency=16)), evaluate(_scenario(concurrency=16, profile=str(path)))
    assert forky.result("sequential").step_us == pytest.approx(plain.result("sequential").step_us)
    assert forky.result("multi_stream").moe_layer_us == pytest.approx(plain.result("multi_stream").moe_layer_us)
    assert forky.result("multi_stream").step_us == pytest.approx(plain.result("multi_stream").step_us + 7.0)


def test_results_are_deterministic_across_cache_clears() -> None:
    first = evaluate(_scenario(concurrency=32)).to_json_dict()
    for fn in (moe_block, attention_block_us, dense_block_us, head_us):
        fn.cache_clear()
    assert evaluate(_scenario(concurrency=32)).to_json_dict() == first


def test_knobs_fall_back_to_sequential() -> None:
    doc = {"model": {"preset": "DeepSeek-V3"}, "platform": {"profile": "h200-datasheet"},
           "parallelism": {"tp": 8, "dp": 1, "ep": 8}, "load": {"concurrency": 64},
           "strategies": {"compare": ["sequential", "multi_stream"], "token_threshold": 32}}
    ev = evaluate(parse_scenario(doc))
    ms = ev.result("multi_stream")
    assert ms.ran == "sequential" and "token_threshold" in (ms.note or "")
    assert ms.step_us == ev.result("sequential").step_us
    doc["strategies"] = {"compare": ["sequential", "multi_stream"], "dp_gate": True}
    assert evaluate(parse_scenario(doc)).result("multi_stream").ran == "sequential"


def test_strategy_without_shared_expert_is_reported_not_run() -> None:
    ev = evaluate(parse_scenario({"model": {"preset": "Qwen3-30B-A3B"}, "platform": {"profile": "h200-datasheet"},
                                  "load": {"concurrency": 4}}))
    ms = ev.result("multi_stream")
    assert ms.step_us is None and "no shared expert" in (ms.note or "")


def test_comm_kernels_hold_few_sms_and_little_hbm() -> None:
    """The dispatch holds COMM_SM of the SMs and little HBM: beside a shared GEMM whose split-K grid covers
    every SM, the only contention is the SM oversubscription 1 + COMM_SM (max-min fair: both at 1/1.15)."""
    program = moe_program(step_case(_scenario(concurrency=8)), "sequential", 1)
    dispatch = next(k for k in _launches(program) if k.kernel == "dispatch")
    gemm = next(k for k in _launches(program) if k.kernel == "shared_gemm_gate_up")
    assert dispatch.sm == COMM_SM and dispatch.bw < 0.1
    assert gemm.sm == 1.0 and gemm.bw + dispatch.bw <= 1 and gemm.tc <= 1
    rates = PROFILE.sharing_model().rates([(dispatch.sm, dispatch.bw, dispatch.tc), (gemm.sm, gemm.bw, gemm.tc)])
    assert rates == pytest.approx([1 / (1 + COMM_SM)] * 2)


@pytest.mark.parametrize("strategy", ["sequential", "multi_stream", "fused_shared"])
def test_one_gpu_block_is_the_validated_layer(strategy: str) -> None:
    """On one GPU (TP1 DP1 EP1) a rank's MoE block is kernels_real's layer: the same kernels at the same
    calibrated costs as the MoE layer builder that ``moesim validate`` checks against the H200."""
    doc = {"model": {"preset": "DeepSeek-V3"}, "platform": {"profile": "h200"}, "load": {"concurrency": 32}}
    block = list(moe_program(step_case(parse_scenario(doc)), strategy, 1).kernels())
    layer = list(moe_layer_program(DSV3, 32, strategy, H200, mode="graph").kernels())
    assert [k.kernel for k in block] == [k.kernel for k in layer]
    assert [k.dur_us for k in block] == pytest.approx([k.dur_us for k in layer], rel=1e-12)
    assert [k.stream for k in block] == [k.stream for k in layer]


def test_grouped_gemm_uses_the_measured_table_at_the_rank_rows() -> None:
    """DP8 EP8, 32 tokens per rank: the rank's gate_up grouped GEMM costs the table's fixed cost plus, per
    touched local expert, the measured time at its mean rows (log-log between the neighbouring points)."""
    case = step_case(_scenario(concurrency=32, profile="h200"))
    launch = next(k for k in moe_program(case, "sequential", 1).kernels() if k.kernel == "grouped_mm_gate_up")
    table = H200.kernel_tables["grouped_mm K=7168 N=4096"]
    touched = touched_experts(DSV3, 256) / 8
    x = 256 / touched  # 32 tokens × 8 picks arrive at this rank's experts
    (x0, y0), (x1, y1) = next((p, q) for p, q in zip(table.points, table.points[1:], strict=False) if p[0] <= x <= q[0])
    per_expert = math.exp(math.log(y0) + (math.log(y1) - math.log(y0)) * (math.log(x) - math.log(x0))
                          / (math.log(x1) - math.log(x0)))
    assert launch.dur_us == pytest.approx(table.fixed_us + touched * per_expert)


def test_router_grid_is_exact_at_powers_of_two_and_close_between() -> None:
    for tokens in (8, 16, 256):  # measured token counts: the router's own Monte-Carlo
        assert grid_touched_experts(DSV3, tokens) == touched_experts(DSV3, tokens)
    lo, hi = touched_experts(DSV3, 181), touched_experts(DSV3, 215)  # grid points round(2^7.5), round(2^7.75)
    between = grid_touched_experts(DSV3, 200)
    assert min(lo, hi) <= between <= max(lo, hi)
    assert between == pytest.approx(touched_experts(DSV3, 200), rel=0.04)  # the Monte-Carlo's noise is ~±3%
    assert grid_touched_experts(QWEN2, 200) == touched_experts(QWEN2, 200)  # uniform router: closed form
