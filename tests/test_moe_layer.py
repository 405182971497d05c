"""The MoE-layer workload builder against facts derived by hand from kernels_real's layer code."""

from __future__ import annotations

import dataclasses

import pytest

from simulator.cost import CostModel
from simulator.engine import simulate
from simulator.errors import InputError
from simulator.expand import expand
from simulator.hazards import find_hazards
from simulator.ir import Launch, Record, SetStream, Wait
from simulator.profile import load_profile
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.layout import expected_touched_experts, split_tokens, touched_experts
from simulator.workloads.moe_layer import emit_moe_layer, moe_layer_program
from simulator.workloads.presets import PRESETS, get_preset

PROFILE = load_profile("h200-datasheet")


def _builder() -> ProgramBuilder:
    return ProgramBuilder(cost=CostModel(PROFILE))


def _launches(program) -> list[Launch]:
    return list(program.kernels())


def test_expected_touched_experts() -> None:
    assert expected_touched_experts(256, 8, 1) == pytest.approx(8)  # one token touches exactly k experts
    # two experts, top-1, two tokens: an expert stays untouched with probability 1/4 → 2 × 3/4
    assert expected_touched_experts(2, 1, 2) == pytest.approx(1.5)
    assert expected_touched_experts(64, 6, 10_000) == pytest.approx(64)
    assert expected_touched_experts(64, 6, 0) == 0


def test_touched_experts_under_the_biased_router() -> None:
    v3, qwen = get_preset("deepseek_v3"), get_preset("qwen2_57b_a14b")
    assert touched_experts(v3, 1) == 8  # one token: exactly top-k distinct experts
    assert touched_experts(qwen, 64) == pytest.approx(expected_touched_experts(64, 8, 64))  # softmax: uniform
    hits = [touched_experts(v3, t) for t in (2, 16, 64, 1024)]
    assert hits == sorted(hits) and 8 < hits[0] <= 16 and hits[-1] <= 256
    # a fixed per-expert bias concentrates the choice: fewer experts than uniform picks would hit
    assert hits[2] < 0.8 * expected_touched_experts(256, 8, 64)
    # one group (Kimi-K2): the group step is a no-op, the bias still concentrates
    assert touched_experts(get_preset("kimi_k2"), 64) < 0.8 * expected_touched_experts(384, 8, 64)


def test_split_tokens() -> None:
    assert split_tokens(5, 2) == [3, 2]  # torch.chunk: the first chunk takes the odd token
    assert split_tokens(4, 1) == [4]
    with pytest.raises(InputError):
        split_tokens(1, 2)
    with pytest.raises(InputError):
        split_tokens(8, 3)


# Torch ops with device work in kernels_real.layer, counted by hand:
# shared MLP: linear, silu, mul, linear (= 4; +3 with Qwen2's sigmoid gate: linear, sigmoid, mul);
# gate: x.float(), linear (= 2) + routing: softmax: softmax, topk; topk_sigmoid: topk, sigmoid;
#   grouped_sigmoid: sigmoid, +bias, topk, sum, topk, zeros_like, scatter_, expand-reshape copy, ==, masked_fill,
#   topk, gather (= 12); renormalize: sum, div; routed_scaling_factor != 1: mul;
# experts: sort, ones_like, zeros, scatter_add_, cumsum, //, index_select, grouped_mm, silu, mul, grouped_mm,
#   index_select, zeros, float, mul, index_add_, to (= 17); final add (= 1).
@pytest.mark.parametrize(("preset", "strategy", "ops"), [
    ("deepseek_v2_lite", "sequential", 4 + 2 + 2 + 17 + 1),
    ("deepseek_v3", "multi_stream", 4 + 2 + 12 + 2 + 1 + 17 + 1),
    ("qwen2_57b_a14b", "sequential", 7 + 2 + 2 + 17 + 1),
    ("llama4_scout", "multi_stream", 4 + 2 + 2 + 17 + 1),
    ("qwen3_30b_a3b", "sequential", 2 + 2 + 2 + 17),
    # fused: no shared MLP and no add; ones (or Qwen2: linear, float, sigmoid) and two cats
    ("deepseek_v2_lite", "fused_shared", 2 + 2 + 1 + 2 + 17),
    ("qwen2_57b_a14b", "fused_shared", 2 + 2 + 3 + 2 + 17),
])
def test_op_counts(preset: str, strategy: str, ops: int) -> None:
    prog = moe_layer_program(PRESETS[preset], 16, strategy, PROFILE)
    assert len(_launches(prog)) == ops


def test_multi_stream_fork_join_structure() -> None:
    prog = moe_layer_program(PRESETS["deepseek_v3"], 4, "multi_stream", PROFILE)
    ops = list(prog.ops)
    first = ops[0]
    assert isinstance(first, Record) and first.stream == "main" and first.event == "ub0.input_ready"
    assert ops[1] == SetStream(stream="aux")
    assert ops[2] == Wait(stream="aux", event="ub0.input_ready")
    aux = [op.kernel for op in _launches(prog) if op.stream == "aux"]
    assert aux == ["shared_gemm_gate_up", "silu", "mul", "shared_gemm_down"]
    rec = next(i for i, op in enumerate(ops) if isinstance(op, Record) and op.event == "ub0.output_ready")
    assert ops[rec].stream == "aux" and ops[rec + 1] == SetStream(stream="main")
    join = next(i for i, op in enumerate(ops) if isinstance(op, Wait) and op.stream == "main")
    assert ops[join].event == "ub0.output_ready"
    after = [op for op in ops[join + 1:] if isinstance(op, Launch)]
    assert [op.kernel for op in after] == ["add"]
    # the routed path runs on main between the fork and the join, starting with the gate
    between = [op for op in ops[rec + 2:join] if isinstance(op, Launch)]
    assert between[0].kernel == "to_float" and all(op.stream == "main" for op in between)


def test_shared_input_is_the_routed_input() -> None:
    prog = moe_layer_program(PRESETS["deepseek_v3"], 4, "multi_stream", PROFILE)
    first = {}
    for op in _launches(prog):
        first.setdefault(op.kernel, op)
    x = first["to_float"].reads[0]
    assert x in first["shared_gemm_gate_up"].reads
    assert x in first["index_select"].reads


def test_no_hazard_and_legal_capture_for_multi_stream() -> None:
    for mode in ("eager", "graph"):
        for ub in (1, 2):
            prog = moe_layer_program(PRESETS["qwen2_57b_a14b"], 8, "multi_stream", PROFILE, mode=mode,
                                     micro_batches=ub, layers_per_graph=2, iterations=2)
            assert find_hazards(prog) == []
            assert expand(prog).capture_errors == []


def test_inplace_overwrite_of_the_input_is_a_race() -> None:
    b = _builder()
    emit_moe_layer(b, PRESETS["deepseek_v3"], 4, "multi_stream", unsafe_inplace=True)
    hazards = find_hazards(b.build())
    assert hazards, "main's in-place write of the input races with aux's read"
    h = hazards[0]
    assert h.buffer == "moe.ub0.x"
    assert {h.first.stream, h.second.stream} == {"main", "aux"}
    assert "scale_input_inplace" in (h.first.kernel, h.second.kernel)


def test_micro_batches_get_one_event_pair_each() -> None:
    prog = moe_layer_program(PRESETS["deepseek_v3"], 5, "multi_stream", PROFILE, micro_batches=2)
    records = [op.event for op in prog.ops if isinstance(op, Record)]
    assert records == ["ub0.input_ready", "ub0.output_ready", "ub1.input_ready", "ub1.output_ready"]
    casts = [op for op in _launches(prog) if op.kernel == "to_float" and op.reads[0].endswith(".x")]
    assert [op.reads[0] for op in casts] == ["moe0.ub0.x", "moe0.ub1.x"]
    # micro-batch 0 has 3 tokens, 1 has 2: the bf16 → fp32 cast moves (2 + 4)·T·H bytes
    moved = [op.bw * op.dur_us * PROFILE.hbm_bytes_per_us for op in casts]
    assert moved == pytest.approx([6 * 3 * 7168, 6 * 2 * 7168])


def test_not_applicable_strategies() -> None:
    with pytest.raises(InputError, match="no shared expert"):
        moe_layer_program(PRESETS["qwen3_30b_a3b"], 4, "multi_stream", PROFILE)
    odd = dataclasses.replace(PRESETS["deepseek_v3"], shared_intermediate=3000)
    with pytest.raises(InputError, match="fused_shared not applicable"):
        moe_layer_program(odd, 4, "fused_shared", PROFILE)
    with pytest.raises(InputError, match="unknown strategy"):
        moe_layer_program(PRESETS["deepseek_v3"], 4, "parallel", PROFILE)
    with pytest.raises(InputError, match="unknown mode"):
        moe_layer_program(PRESETS["deepseek_v3"], 4, "sequential", PROFILE, mode="lazy")


def test_fused_grouped_gemm_work() -> None:
    d = PRESETS["deepseek_v2_lite"]  # 2 shared experts of the routed width → 2 pseudo-experts, top-6 + 2
    t = 32
    prog = moe_layer_program(d, t, "fused_shared", PROFILE)
    gu = next(op for op in _launches(prog) if op.kernel == "grouped_mm_gate_up")
    fam = PROFILE.family("grouped_gemm")
    flops = 2.0 * t * (6 + 2) * d.hidden * 2 * d.moe_intermediate
    # the demand is the kernel's tensor work over its duration; padding is per group rows, never less
    assert gu.tc * gu.dur_us * PROFILE.tensor_flops_per_us >= flops * 0.999
    assert fam.tile_m >= 1
    assert not [op for op in _launches(prog) if op.kernel.startswith("shared_gemm")]


def test_preset_lookup() -> None:
    assert get_preset("Llama-4-Maverick").n_experts == 128
    with pytest.raises(InputError, match="unknown MoE preset"):
        get_preset("gpt5")


def test_overlap_never_slower_in_graph_mode() -> None:
    sharing = PROFILE.sharing_model()
    for t in (1, 64):
        seq = simulate(moe_layer_program(PRESETS["qwen2_57b_a14b"], t, "sequential", PROFILE, mode="graph"),
                       sharing)
        ms = simulate(moe_layer_program(PRESETS["qwen2_57b_a14b"], t, "multi_stream", PROFILE, mode="graph"),
                      sharing)
        assert ms.makespan_us < seq.makespan_us
