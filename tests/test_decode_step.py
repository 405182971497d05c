"""The decode-step model: expert views and collective times by hand, block structure, legality, composition."""

from __future__ import annotations

import pytest

from simulator.evaluate import (
    attention_block_us,
    block_time,
    dense_block_us,
    evaluate,
    head_us,
    moe_block_us,
    moe_program,
    step_case,
)
from simulator.expand import expand
from simulator.hazards import find_hazards
from simulator.ir import Launch
from simulator.profile import load_profile
from simulator.scenario import parse_scenario
from simulator.workloads.collectives import COMM_SM, LinkFigures, all_reduce_us, all_to_all_us
from simulator.workloads.decode_step import Parallelism, expert_view, graph_program
from simulator.workloads.presets import get_preset

DSV3 = get_preset("deepseek_v3")
PROFILE = load_profile("h200-datasheet")


def _scenario(tp: int = 1, dp: int = 8, ep: int = 8, concurrency: int = 4, preset: str = "DeepSeek-V3",
              dbo: bool = False):
    return parse_scenario({"model": {"preset": preset}, "platform": {"profile": "h200-datasheet"},
                           "parallelism": {"tp": tp, "dp": dp, "ep": ep}, "load": {"concurrency": concurrency},
                           "strategies": {"dbo": [False, dbo] if dbo else [False]}})


def test_expert_view_dp_ep_by_hand() -> None:
    # DP8 EP8, one token per rank: 8 distinct tokens, each with 8 of 256 experts; a rank holds 32 experts.
    v = expert_view(DSV3, Parallelism(1, 8, 8), 8, fused=False)
    assert v.rows == 8  # 8 tokens × 8 picks / 8 ranks
    assert v.touched == pytest.approx(32 * (1 - (1 - 8 / 256) ** 8))
    assert (v.groups, v.intermediate) == (32, 2048)


def test_expert_view_tp_and_fused_by_hand() -> None:
    v = expert_view(DSV3, Parallelism(8, 1, 1), 4, fused=False)  # plain TP8: all experts, width 2048 / 8
    assert (v.rows, v.groups, v.intermediate) == (32, 256, 256)
    assert v.touched == pytest.approx(256 * (1 - (1 - 8 / 256) ** 4))
    f = expert_view(DSV3, Parallelism(8, 1, 8), 64, fused=True)  # TP8 EP8, 64 tokens, one shared chunk
    assert f.rows == 64 * 8 // 8 + 64 * 1 // 8
    assert f.groups == 32 + 1
    assert f.touched == pytest.approx(32 * (1 - (1 - 8 / 256) ** 64) + 1)


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


def test_results_are_deterministic_across_cache_clears() -> None:
    first = evaluate(_scenario(concurrency=32)).to_json_dict()
    for fn in (moe_block_us, attention_block_us, dense_block_us, head_us):
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
