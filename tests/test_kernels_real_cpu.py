"""CPU tests of the real MoE layer: numerics against a float64 reference, routing, backends, bad input."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from kernels_real.config import ConfigError, MoEConfig, NotApplicableError, get_preset  # noqa: E402
from kernels_real.grouped_gemm import BACKENDS, grouped_mm, make_groups  # noqa: E402
from kernels_real.layer import MoELayer, MoEWeights  # noqa: E402
from kernels_real.reference import reference_forward  # noqa: E402
from kernels_real.routing import route  # noqa: E402
from simulator.workloads.presets import PRESETS  # noqa: E402

TOL = 1.5e-2  # relative Frobenius error allowed for bf16 against float64


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.double() - ref).norm() / ref.norm()).item()


def _input(cfg: MoEConfig, tokens: int, seed: int = 4) -> torch.Tensor:
    return torch.randn(tokens, cfg.hidden, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_strategy_matches_float64_reference(name: str, backend: str) -> None:
    cfg = get_preset(name).scaled_down()
    w = MoEWeights.random(cfg, "cpu", seed=1)
    x = _input(cfg, 20)
    assert (x != 0).float().mean() > 0.99  # never zeros
    ref = reference_forward(cfg, x, w)
    assert ref.abs().max() > 0.5
    layer = MoELayer(cfg, "cpu", backend=backend)
    ran = 0
    for strategy in ("sequential", "multi_stream", "fused_shared"):
        if cfg.applicable(strategy) is None:
            assert _rel_err(layer(x, w, strategy), ref) < TOL, strategy
            ran += 1
    assert ran == (1 if name == "qwen3_30b_a3b" else 3)


def test_reference_detects_a_missing_shared_expert() -> None:
    # the tolerance is tight enough that dropping the shared expert would fail the comparison
    cfg = get_preset("deepseek_v3").scaled_down()
    w = MoEWeights.random(cfg, "cpu", seed=1)
    x = _input(cfg, 20)
    ref = reference_forward(cfg, x, w)
    no_shared = dataclasses.replace(w, shared_w2=torch.zeros_like(w.shared_w2))
    assert _rel_err(MoELayer(cfg)(x, no_shared, "sequential"), ref) > 10 * TOL


@pytest.mark.parametrize("name", ["deepseek_v2_lite", "qwen2_57b_a14b", "llama4_scout", "deepseek_v3"])
def test_fused_shared_equals_sequential(name: str) -> None:
    cfg = get_preset(name).scaled_down()
    w = MoEWeights.random(cfg, "cpu", seed=9)
    x = _input(cfg, 33)
    layer = MoELayer(cfg)
    seq, fused = layer(x, w, "sequential").float(), layer(x, w, "fused_shared").float()
    assert ((seq - fused).norm() / seq.norm()).item() < 1e-2


def test_presets_carry_the_public_shapes() -> None:
    v3, kimi = get_preset("deepseek_v3"), get_preset("kimi_k2")
    assert (v3.hidden, v3.moe_intermediate, v3.n_experts, v3.top_k, v3.n_shared, v3.shared_intermediate) == (
        7168, 2048, 256, 8, 1, 2048)
    assert kimi.n_experts == 384
    q2 = get_preset("qwen2_57b_a14b")
    assert (q2.hidden, q2.moe_intermediate, q2.n_experts, q2.top_k, q2.shared_total, q2.shared_gate) == (
        3584, 2560, 64, 8, 20480, True)
    scout = get_preset("llama4_scout")
    assert (scout.hidden, scout.moe_intermediate, scout.n_experts, scout.top_k, scout.shared_total) == (
        5120, 8192, 16, 1, 8192)
    lite = get_preset("deepseek_v2_lite")
    assert (lite.hidden, lite.moe_intermediate, lite.n_experts, lite.top_k, lite.n_shared,
            lite.shared_intermediate) == (2048, 1408, 64, 6, 2, 1408)
    # 256 experts × 3 matrices × 7168 × 2048 bf16 ≈ 22.5 GB (plus the fused shared copy)
    assert 22.5e9 < v3.weight_bytes() < 22.8e9


def test_qwen3_has_no_shared_expert_and_says_so() -> None:
    cfg = get_preset("qwen3_30b_a3b")
    assert not cfg.has_shared
    for strategy in ("multi_stream", "fused_shared"):
        assert "no shared expert" in cfg.applicable(strategy)
    tiny = cfg.scaled_down()
    with pytest.raises(NotApplicableError, match="multi_stream not applicable"):
        MoELayer(tiny)(_input(tiny, 2), MoEWeights.random(tiny, "cpu"), "multi_stream")


def test_softmax_routing_by_hand() -> None:
    cfg = MoEConfig("t", hidden=4, moe_intermediate=4, n_experts=4, top_k=2, renormalize=True)
    logits = torch.tensor([[0.0, 2.0, 1.0, -1.0]])
    ids, weights = route(logits, cfg, None)
    assert ids.tolist() == [[1, 2]]
    # renormalised softmax over the two chosen: e^2 / (e^2 + e^1) = 1 / (1 + e^-1)
    assert weights[0, 0].item() == pytest.approx(1 / (1 + torch.e**-1), rel=1e-6)


def test_grouped_sigmoid_routing_restricts_to_best_groups_by_hand() -> None:
    cfg = MoEConfig("g", hidden=4, moe_intermediate=4, n_experts=8, top_k=2, router="grouped_sigmoid",
                    n_group=4, topk_group=1, renormalize=False, routed_scaling_factor=2.0)
    # groups {0,1} {2,3} {4,5} {6,7}. Expert 0 has the single highest logit, but group 2 has the best pair.
    logits = torch.tensor([[4.0, -4.0, 0.0, 0.0, 2.0, 2.0, -1.0, -1.0]])
    bias = torch.zeros(8)
    bias[5] = 0.01  # breaks the tie inside group 2: expert 5 first
    ids, weights = route(logits, cfg, bias)
    assert ids.tolist() == [[5, 4]]
    sig2 = 1 / (1 + torch.e**-2.0)
    assert weights[0].tolist() == pytest.approx([2 * sig2, 2 * sig2], rel=1e-6)  # bias not in the weight


def test_topk_sigmoid_routing_by_hand() -> None:
    cfg = MoEConfig("s", hidden=4, moe_intermediate=4, n_experts=3, top_k=1, router="topk_sigmoid",
                    renormalize=False)
    ids, weights = route(torch.tensor([[0.5, 0.0, -3.0]]), cfg, None)
    assert ids.tolist() == [[0]]
    assert weights.item() == pytest.approx(1 / (1 + torch.e**-0.5), rel=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_gemm_backends_by_row(backend: str) -> None:
    gen = torch.Generator().manual_seed(0)
    ids = torch.tensor([2, 0, 2, 3, 0, 2])
    order, groups = make_groups(ids, n_groups=4, capacity=3)
    assert groups.counts.tolist() == [2, 0, 3, 1]
    assert groups.offsets.tolist() == [2, 2, 5, 6]
    assert ids[order].tolist() == [0, 0, 2, 2, 2, 3]
    a = torch.randn(6, 8, generator=gen)
    w = torch.randn(4, 5, 8, generator=gen)
    out = grouped_mm(a, w, groups, backend)
    for row, g in enumerate(ids[order].tolist()):
        torch.testing.assert_close(out[row], w[g] @ a[row])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"top_k": 9}, "top_k=9 exceeds n_experts=8"),
        ({"dtype": "float64"}, "unsupported dtype"),
        ({"router": "argmax"}, "unknown router"),
        ({"n_shared": 1}, "both be 0"),
        ({"router": "grouped_sigmoid", "n_group": 3}, "not divisible by n_group"),
        ({"shared_gate": True}, "needs a shared expert"),
    ],
)
def test_bad_configs_raise_clear_errors(changes: dict[str, object], message: str) -> None:
    base = {"name": "bad", "hidden": 16, "moe_intermediate": 8, "n_experts": 8, "top_k": 2}
    with pytest.raises(ConfigError, match=message):
        MoEConfig(**(base | changes))


def test_bad_inputs_raise_clear_errors() -> None:
    cfg = get_preset("deepseek_v2_lite").scaled_down()
    layer, w = MoELayer(cfg), MoEWeights.random(cfg, "cpu")
    with pytest.raises(ConfigError, match=r"input must be \[tokens >= 1, 128\]"):
        layer(torch.randn(4, 64).to(torch.bfloat16), w)
    with pytest.raises(ConfigError, match="input dtype"):
        layer(torch.randn(4, 128), w)
    with pytest.raises(ConfigError, match="unknown strategy"):
        layer(_input(cfg, 2), w, "parallel")
    with pytest.raises(ConfigError, match="micro-batch index 2"):
        layer(_input(cfg, 2), w, "multi_stream", ubatch=2)
    with pytest.raises(ConfigError, match="unknown MoE preset"):
        get_preset("gpt-5")
    with pytest.raises(ConfigError, match="CPU only"):
        MoELayer(cfg, "cuda", backend="loop")


def test_record_function_ranges_name_the_regions() -> None:
    from torch.profiler import ProfilerActivity, profile

    cfg = get_preset("qwen2_57b_a14b").scaled_down()
    layer, w = MoELayer(cfg), MoEWeights.random(cfg, "cpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        layer(_input(cfg, 3), w, "multi_stream")
    names = {e.name for e in prof.events()}
    assert {"moe.gate", "moe.routed_experts", "moe.shared_experts"} <= names


def test_kernels_real_never_imported_by_simulator() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "simulator"
    pattern = re.compile(r"^\s*(from|import)\s+kernels_real\b", re.MULTILINE)
    offenders = [p for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
