"""Bytes moved through device memory and flops of one kernel spec (see ``shapes.py``).

Bytes count each input read once and each output written once (the fewest a kernel must move); flops count
multiply-adds as two. bf16 activations and weights (2 bytes), float32 router GEMM, logits and combine, int64
indices, int32 expert counts. Element-wise flops are nominal (1 per element for add/mul/scatter_add/cumsum/
index_add, 4 for SiLU, sigmoid and softmax) and never the binding term.
"""

from __future__ import annotations

from typing import Any

BF16 = 2
F32 = 4
I64 = 8
I32 = 4

Spec = dict[str, Any]


def grouped_rows(spec: Spec) -> tuple[int, int]:
    """(rows, active experts) of a grouped GEMM spec."""
    counts = spec["counts"]
    return sum(counts), sum(1 for c in counts if c > 0)


def cost(spec: Spec) -> tuple[int, int]:
    """(bytes, flops) of one call of ``spec``."""
    op = spec["op"]
    if op == "mm":
        m, k, n = spec["M"], spec["K"], spec["N"]
        return BF16 * (m * k + k * n + m * n), 2 * m * k * n
    if op == "mm_f32":
        m, k, n = spec["M"], spec["K"], spec["N"]
        return F32 * (m * k + k * n + m * n), 2 * m * k * n
    if op == "grouped_mm":
        rows, active = grouped_rows(spec)
        k, n = spec["K"], spec["N"]
        return BF16 * (rows * k + active * k * n + rows * n) + 4 * spec["E"], 2 * rows * k * n
    if op in ("add", "mul"):
        elems = spec["M"] * spec["N"]
        return 3 * BF16 * elems, elems
    if op == "silu":
        elems = spec["M"] * spec["N"]
        return 2 * BF16 * elems, 4 * elems
    if op in ("silu_half", "mul_half"):  # on [M, 2N]: SiLU reads one half; mul reads SiLU's out + the other
        elems = spec["M"] * spec["N"]
        return (2 if op == "silu_half" else 3) * BF16 * elems, (4 if op == "silu_half" else 1) * elems
    if op in ("softmax", "sigmoid"):
        elems = spec["M"] * spec["E"]
        return 2 * F32 * elems, 4 * elems
    if op == "scatter_add":  # ids and ones in, the [E] counts read and written
        n = spec["n"]
        return (I64 + I32) * n + 2 * I32 * spec["E"], n
    if op == "cumsum":
        return 2 * I32 * spec["E"], spec["E"]
    if op == "index_add":  # fp32 source rows and their indices in, the [M, N] fp32 output read and written
        m, k, n = spec["M"], spec["k"], spec["N"]
        return F32 * (m * k * n + 2 * m * n) + I64 * m * k, m * k * n
    if op == "topk":
        m, e, k = spec["M"], spec["E"], spec["k"]
        return F32 * m * e + (F32 + I64) * m * k, 0
    if op == "sort":
        return 3 * I64 * spec["n"], 0  # keys in, sorted keys and permutation out
    if op == "sum_k":
        m, k, n = spec["M"], spec["k"], spec["N"]
        return BF16 * (m * k * n + m * n), m * (k - 1) * n
    if op == "index_select":
        m, k, n = spec["M"], spec["k"], spec["N"]
        return BF16 * (m * n + m * k * n) + I64 * m * k, 0
    if op == "copy":
        return 2 * spec["bytes"], 0
    if op == "chain":
        parts = [cost(s) for s in spec["ops"]]
        return sum(b for b, _ in parts), sum(f for _, f in parts)
    raise ValueError(f"unknown op {op!r}")


def weight_bytes(spec: Spec) -> int:
    """Bytes of the operand that a rotation must vary to keep a call's data out of L2 (for GEMMs the weight;
    otherwise the whole call's traffic)."""
    if spec["op"] == "mm":
        return BF16 * spec["K"] * spec["N"]
    if spec["op"] == "mm_f32":
        return F32 * spec["K"] * spec["N"]
    return cost(spec)[0]


def rotations(spec: Spec, l2_bytes: int, factor: int = 4, cap: int = 64) -> int:
    """How many distinct buffer sets to rotate through so that consecutive calls touch ``factor`` × L2."""
    per_call = max(1, weight_bytes(spec))
    need = -(-factor * l2_bytes // per_call)
    return max(1, min(cap, need))
