"""What to measure: the presets' MoE dimensions, token counts, solo kernel specs and co-run pairs.

A kernel spec is a plain JSON-able dict ``{"family": ..., "op": ..., <dims>, "tag": ...}``; ``ops.py`` turns
it into torch calls and ``accounting.py`` into bytes and flops. Lists are ordered so that a run cut short by
its budget still covers every family (a coarse token pass first, then the rest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Spec = dict[str, Any]


@dataclass(frozen=True)
class Preset:
    """MoE dimensions of a shipped model preset."""

    name: str
    hidden: int
    moe_inter: int
    experts: int
    top_k: int
    shared_inter: int  # total shared-expert width (n_shared × width); 0 = none
    shared_gate: bool = False  # Qwen2-style sigmoid gate Linear(hidden, 1) on the shared output
    score: str = "softmax"  # router scores over the logits: softmax or sigmoid (kernels_real's router kinds)


PRESETS: tuple[Preset, ...] = (
    Preset("DeepSeek-V3", 7168, 2048, 256, 8, 2048, score="sigmoid"),
    Preset("Kimi-K2", 7168, 2048, 384, 8, 2048, score="sigmoid"),
    Preset("Qwen2-57B-A14B", 3584, 2560, 64, 8, 20480, shared_gate=True),
    Preset("Llama-4-Scout", 5120, 8192, 16, 1, 8192, score="sigmoid"),
    Preset("DeepSeek-V2-Lite", 2048, 1408, 64, 6, 2 * 1408),
    Preset("Qwen3-30B-A3B", 2048, 768, 128, 8, 0),
)
PRESET_BY_NAME = {p.name: p for p in PRESETS}
QUICK_PRESETS = ("DeepSeek-V3", "Qwen2-57B-A14B")

TOKENS: tuple[int, ...] = tuple(2**i for i in range(11))  # 1..1024
COARSE_TOKENS: tuple[int, ...] = (1, 16, 128, 1024)
QUICK_TOKENS: tuple[int, ...] = (1, 128)
ELEMENTWISE_ROWS: tuple[int, ...] = tuple(2**i for i in range(14))  # 1..8192 covers tokens × top-k
BIG_M = 4096  # the compute-bound partner GEMM of the co-run pairs


def route_counts(tokens: int, experts: int, top_k: int, seed: int = 0) -> list[int]:
    """Rows per expert when each of ``tokens`` tokens picks ``top_k`` distinct experts uniformly at random
    (seeded, so every run measures the same routing)."""
    if top_k > experts:
        raise ValueError(f"top_k {top_k} > experts {experts}")
    rng = np.random.default_rng(seed)
    picks = rng.random((tokens, experts)).argsort(axis=1)[:, :top_k]
    return [int(c) for c in np.bincount(picks.ravel(), minlength=experts)]


def _presets(quick: bool) -> list[Preset]:
    return [PRESET_BY_NAME[n] for n in QUICK_PRESETS] if quick else list(PRESETS)


def gemm_kn(preset: Preset) -> list[tuple[str, int, int]]:
    """(role, K, N) of the dense GEMMs of one preset: expert gate/up and down, router gate, shared experts."""
    p = preset
    out = [("gate_up", p.hidden, 2 * p.moe_inter), ("down", p.moe_inter, p.hidden), ("router", p.hidden, p.experts)]
    if p.shared_inter:
        out += [("shared_gate_up", p.hidden, 2 * p.shared_inter), ("shared_down", p.shared_inter, p.hidden)]
    if p.shared_gate:
        out.append(("shared_gate", p.hidden, 1))
    return out


def gemm_spec(m: int, k: int, n: int, tag: str = "") -> Spec:
    return {"family": "gemm", "op": "mm", "M": m, "K": k, "N": n, "tag": tag}


GROUPED_WEIGHTS = "[E, N, K] transposed"  # the layer's expert layout (kernels_real.grouped_gemm); ops.build holds it
LEGACY_GROUPED_WEIGHTS = "[E, K, N]"  # what the microbench held before 2026-12-04 (records without "weights")


def grouped_spec(preset: Preset, tokens: int, role: str, seed: int = 0) -> Spec:
    """Routed-expert grouped GEMM (``torch._grouped_mm``) of one preset at ``tokens`` tokens."""
    k, n = (preset.hidden, 2 * preset.moe_inter) if role == "gate_up" else (preset.moe_inter, preset.hidden)
    counts = route_counts(tokens, preset.experts, preset.top_k, seed)
    return {"family": "grouped_gemm", "op": "grouped_mm", "tokens": tokens, "top_k": preset.top_k,
            "E": preset.experts, "K": k, "N": n, "counts": counts, "weights": GROUPED_WEIGHTS,
            "tag": f"{preset.name}:{role}"}


def elementwise_spec(op: str, m: int, n: int, tag: str = "") -> Spec:
    return {"family": "elementwise", "op": op, "M": m, "N": n, "tag": tag}


def topk_spec(m: int, experts: int, k: int, tag: str = "") -> Spec:
    return {"family": "topk", "op": "topk", "M": m, "E": experts, "k": k, "tag": tag}


def sort_spec(n: int, tag: str = "") -> Spec:
    return {"family": "sort", "op": "sort", "n": n, "tag": tag}


def reduction_spec(m: int, k: int, n: int, tag: str = "") -> Spec:
    return {"family": "reduction", "op": "sum_k", "M": m, "k": k, "N": n, "tag": tag}


def gather_spec(m: int, k: int, n: int, tag: str = "") -> Spec:
    return {"family": "gather", "op": "index_select", "M": m, "k": k, "N": n, "tag": tag}


def copy_spec(nbytes: int, tag: str = "") -> Spec:
    return {"family": "copy", "op": "copy", "bytes": nbytes, "tag": tag}


def chain_spec(ops: list[Spec], tag: str) -> Spec:
    """Several kernels issued back to back on one stream (one side of an MoE co-run)."""
    return {"family": "chain", "op": "chain", "ops": ops, "tag": tag}


def _join(names: list[str]) -> str:
    return ",".join(dict.fromkeys(names))


def _solo_for_tokens(presets: list[Preset], tokens: tuple[int, ...], quick: bool) -> list[Spec]:
    """Solo specs for the given token counts, grouped by weight shape so that buffers can be reused."""
    specs: list[Spec] = []
    kn: dict[tuple[int, int], list[str]] = {}
    for p in presets:
        for role, k, n in gemm_kn(p):
            kn.setdefault((k, n), []).append(f"{p.name}:{role}")
    for (k, n), tags in kn.items():
        specs += [gemm_spec(m, k, n, _join(tags)) for m in tokens]
    for p in presets:
        for role in ("gate_up", "down"):
            specs += [grouped_spec(p, t, role) for t in tokens]
    rows = sorted({t * k for t in tokens for k in {1, *(p.top_k for p in presets)}})
    rows = [r for r in rows if r in ELEMENTWISE_ROWS] if not quick else list(tokens)
    widths: dict[int, list[str]] = {}
    hiddens: dict[int, list[str]] = {}
    for p in presets:
        widths.setdefault(p.moe_inter, []).append(f"{p.name}:act")
        if p.shared_inter:
            widths.setdefault(p.shared_inter, []).append(f"{p.name}:shared_act")
        hiddens.setdefault(p.hidden, []).append(f"{p.name}:residual")
    for n, tags in widths.items():
        specs += [elementwise_spec(op, m, n, _join(tags)) for op in ("silu", "mul") for m in rows]
    for n, tags in hiddens.items():
        specs += [elementwise_spec("add", m, n, _join(tags)) for m in rows]
    ek: dict[tuple[int, int], list[str]] = {}
    for p in presets:
        ek.setdefault((p.experts, p.top_k), []).append(p.name)
    for (e, k), tags in ek.items():
        specs += [topk_spec(m, e, k, _join(tags)) for m in tokens]
    for k in dict.fromkeys(p.top_k for p in presets):
        specs += [sort_spec(t * k, f"top_k={k}") for t in tokens]
    kh: dict[tuple[int, int], list[str]] = {}
    for p in presets:
        if p.top_k > 1:
            kh.setdefault((p.top_k, p.hidden), []).append(p.name)
    for (k, h), tags in kh.items():
        specs += [reduction_spec(m, k, h, _join(tags)) for m in tokens]
        specs += [gather_spec(m, k, h, _join(tags)) for m in tokens]
    return specs


def solo_specs(quick: bool = False) -> list[Spec]:
    """Every solo spec, coarse token counts first (so a budget cut keeps every family), then the rest."""
    presets = _presets(quick)
    if quick:
        specs = _solo_for_tokens(presets, QUICK_TOKENS, quick=True)
        return specs + [copy_spec(1 << s, "d2d") for s in (20, 28)]
    first = _solo_for_tokens(presets, COARSE_TOKENS, quick=False)
    first += [copy_spec(1 << s, "d2d") for s in range(10, 31, 4)]
    rest = _solo_for_tokens(presets, tuple(t for t in TOKENS if t not in COARSE_TOKENS), quick=False)
    rest += [copy_spec(1 << s, "d2d") for s in range(12, 31, 4)]
    seen: set[str] = set()
    out: list[Spec] = []
    for s in first + rest:
        key = repr(sorted(s.items()))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def grouped_solo_specs(quick: bool = False, legacy_too: bool = False) -> list[Spec]:
    """The routed experts' grouped GEMMs among ``solo_specs`` (``--only grouped``); with ``legacy_too`` each
    also in the layout measured before 2026-12-04, right after it (an A/B of the two layouts in one run)."""
    specs = [s for s in solo_specs(quick) if s["op"] == "grouped_mm"]
    if not legacy_too:
        return specs
    return [v for s in specs for v in (s, {**s, "weights": LEGACY_GROUPED_WEIGHTS})]


def moe_sides(preset: Preset, tokens: int) -> tuple[Spec, Spec]:
    """(routed, shared) kernel chains of one MoE layer's experts, as a multi-stream schedule overlaps them:
    routed = grouped gate/up, SiLU, mul, grouped down; shared = gate/up, SiLU, mul, down (+ sigmoid gate)."""
    p = preset
    rows = tokens * p.top_k
    routed = [grouped_spec(p, tokens, "gate_up"), elementwise_spec("silu", rows, p.moe_inter),
              elementwise_spec("mul", rows, p.moe_inter), grouped_spec(p, tokens, "down")]
    shared = [gemm_spec(tokens, p.hidden, 2 * p.shared_inter), elementwise_spec("silu", tokens, p.shared_inter),
              elementwise_spec("mul", tokens, p.shared_inter), gemm_spec(tokens, p.shared_inter, p.hidden)]
    if p.shared_gate:
        shared += [gemm_spec(tokens, p.hidden, 1), elementwise_spec("mul", tokens, p.hidden)]
    return (chain_spec(routed, f"{p.name}:routed@{tokens}"), chain_spec(shared, f"{p.name}:shared@{tokens}"))


def routing_specs(preset: Preset, tokens: int) -> list[Spec]:
    """The routing-path kernels of one MoE layer at ``tokens`` tokens, as kernels_real issues them (families
    are the profile's traced ``op:KEY`` families): fp32 router GEMM, softmax/sigmoid scores, sorted top-k,
    stable sort of the M·k expert ids, scatter_add counts, cumsum offsets, index_select of the routed rows,
    SiLU-and-mul on the strided halves of [M·k, 2·I] (two kernels), index_add_ combine in fp32."""
    p, m = preset, tokens
    rows, tag = tokens * preset.top_k, f"{preset.name}@{tokens}"
    act = [{"family": "op:act_silu", "op": "silu_half", "M": rows, "N": p.moe_inter, "tag": f"{tag}:act_silu"},
           {"family": "op:act_mul", "op": "mul_half", "M": rows, "N": p.moe_inter, "tag": f"{tag}:act_mul"}]
    return [
        {"family": "op:router_gemm", "op": "mm_f32", "M": m, "K": p.hidden, "N": p.experts, "tag": tag},
        {"family": f"op:{p.score}", "op": p.score, "M": m, "E": p.experts, "tag": tag},
        {"family": "op:topk", "op": "topk", "M": m, "E": p.experts, "k": p.top_k, "sorted": True, "tag": tag},
        {"family": "op:sort", "op": "sort", "n": rows, "E": p.experts, "tag": tag},
        {"family": "op:scatter_add", "op": "scatter_add", "n": rows, "E": p.experts, "tag": tag},
        {"family": "op:cumsum", "op": "cumsum", "E": p.experts, "tag": tag},
        {"family": "op:index_select", "op": "index_select", "M": m, "k": p.top_k, "N": p.hidden, "tag": tag},
        chain_spec(act, f"{tag}:silu_and_mul"),
        {"family": "op:index_add", "op": "index_add", "M": m, "k": p.top_k, "N": p.hidden, "tag": tag},
    ]


def _pair(kind: str, a: Spec, b: Spec, staggered: bool = False) -> dict[str, Any]:
    """A co-run pair; ``staggered`` pairs are measured in both start orders, the second side ~2 µs later."""
    return {"kind": kind, "a": a, "b": b, "staggered": staggered}


def routing_pairs(quick: bool = False) -> list[dict[str, Any]]:
    """Each routing kernel (side a) beside the small-M shared-expert gate/up GEMM (Qwen2 at 1 and 16 tokens,
    DeepSeek-V3 at 1) and beside the same preset's grouped gate/up GEMM at 1 and 16 tokens (side b), at the
    partner's token count; measured in both start orders (staggered)."""
    ds, qw = PRESET_BY_NAME["DeepSeek-V3"], PRESET_BY_NAME["Qwen2-57B-A14B"]

    def shared_up(p: Preset, t: int) -> Spec:
        return gemm_spec(t, p.hidden, 2 * p.shared_inter, f"{p.name}:shared_gate_up")

    partners = [("routing_x_shared", qw, 1, shared_up(qw, 1)), ("routing_x_grouped", qw, 1, grouped_spec(qw, 1,
                                                                                                        "gate_up"))]
    if quick:
        return [_pair(kind, routing_specs(p, t)[2], b, staggered=True) for kind, p, t, b in partners]
    partners += [("routing_x_shared", qw, 16, shared_up(qw, 16)), ("routing_x_shared", ds, 1, shared_up(ds, 1)),
                 ("routing_x_grouped", qw, 16, grouped_spec(qw, 16, "gate_up")),
                 ("routing_x_grouped", ds, 1, grouped_spec(ds, 1, "gate_up")),
                 ("routing_x_grouped", ds, 16, grouped_spec(ds, 16, "gate_up"))]
    return [_pair(kind, a, b, staggered=True) for kind, p, t, b in partners for a in routing_specs(p, t)]


def corun_pairs(quick: bool = False) -> list[dict[str, Any]]:
    """Co-run pairs, most informative first: the MoE overlap itself, then memory × memory, memory ×
    compute, small latency-bound × large (all gated: both sides start on one event), then the staggered
    routing-kernel pairs of ``routing_pairs``."""
    ds, qw = PRESET_BY_NAME["DeepSeek-V3"], PRESET_BY_NAME["Qwen2-57B-A14B"]
    big = gemm_spec(BIG_M, 7168, 4096, "big")
    copy256, copy64 = copy_spec(256 << 20, "d2d"), copy_spec(64 << 20, "d2d")

    def moe_gemms(p: Preset, t: int) -> dict[str, Any]:
        return _pair("moe_grouped_x_shared", grouped_spec(p, t, "gate_up"),
                     gemm_spec(t, p.hidden, 2 * p.shared_inter, f"{p.name}:shared_gate_up"))

    def moe_chain(p: Preset, t: int) -> dict[str, Any]:
        return _pair("moe_routed_x_shared", *moe_sides(p, t))

    ds_up1 = gemm_spec(1, 7168, 4096, "DeepSeek-V3:shared_gate_up")
    qw_up1 = gemm_spec(1, 3584, 40960, "Qwen2-57B-A14B:shared_gate_up")
    if quick:
        return [moe_chain(qw, 1), moe_gemms(ds, 1), _pair("mem_x_mem", copy256, copy256),
                _pair("small_x_large", topk_spec(1, 256, 8, "DeepSeek-V3"), qw_up1), *routing_pairs(quick=True)]
    lm, dl = PRESET_BY_NAME["Llama-4-Scout"], PRESET_BY_NAME["DeepSeek-V2-Lite"]
    pairs = [moe_chain(qw, 1), moe_chain(ds, 1), moe_chain(qw, 64), moe_chain(ds, 256)]
    pairs += [moe_gemms(p, t) for p in (ds, qw) for t in COARSE_TOKENS]
    pairs += [moe_gemms(lm, 1), moe_gemms(lm, 128), moe_gemms(dl, 1), moe_gemms(dl, 64)]
    pairs += [_pair("mem_x_mem", ds_up1, ds_up1), _pair("mem_x_mem", copy256, copy256),
              _pair("mem_x_mem", copy64, copy256),
              _pair("mem_x_mem", gemm_spec(1, 2048, 7168, "DeepSeek-V3:shared_down"),
                    gemm_spec(1, 20480, 3584, "Qwen2-57B-A14B:shared_down"))]
    pairs += [_pair("mem_x_compute", ds_up1, big), _pair("mem_x_compute", copy256, big),
              _pair("mem_x_compute", qw_up1, big)]
    pairs += [_pair("small_x_large", topk_spec(1, 256, 8, "DeepSeek-V3"), qw_up1),
              _pair("small_x_large", gemm_spec(1, 7168, 256, "DeepSeek-V3:router"), grouped_spec(ds, 64, "gate_up")),
              _pair("small_x_large", topk_spec(64, 256, 8, "DeepSeek-V3"), big),
              _pair("small_x_large", sort_spec(8, "top_k=8"), copy256),
              _pair("small_x_large", elementwise_spec("silu", 1, 2048, "DeepSeek-V3:shared_act"), big)]
    return pairs + routing_pairs()
