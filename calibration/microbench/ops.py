"""Turn a kernel spec (``shapes.py``) into torch calls on the GPU, one callable per rotation of buffers.

Inputs are random (never zeros: zeros run faster than real data). Rotating through several buffer sets keeps
consecutive calls' weights out of the L2; grouped GEMMs rotate the routing (a different seed picks other
experts of one weight tensor), put each routing's input rows at several addresses (``row_placements``; records
before 2026-12-07 had one) and hold their experts as the layer does (``[E, N, K]``, passed transposed: the
``weights`` field of their spec; records before 2026-12-04 measured ``[E, K, N]``, another kernel layout).
Large tensors live in a ``cache`` dict the caller clears between groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calibration.microbench.accounting import rotations
from calibration.microbench.shapes import LEGACY_GROUPED_WEIGHTS, route_counts

Call = Callable[[], Any]
Spec = dict[str, Any]


def _rand(torch: Any, shape: tuple[int, ...], dtype: Any, dev: Any) -> Any:
    return torch.randn(shape, dtype=dtype, device=dev)


ROW_PLACEMENTS = 4  # grouped GEMMs: each rotation's rows at this many addresses, the chain cycling through them
SPACER_BYTES = 4096  # placement p follows a spacer allocation of (2p + 1) x this, so the copies land apart


def row_placements(torch: Any, rows: Any, dev: Any, cache: dict[Any, Any], rotation: int) -> list[Any]:
    """``rows`` and ``ROW_PLACEMENTS`` − 1 copies of it at other addresses. A grouped GEMM of one or two rows per
    expert runs up to 17 % longer or shorter by where its rows lie, nothing else equal (session 30's placement
    check, ``calibration/measurements/h100/2026-12-07``): a chain over several placements times their mean, as
    the layer's own allocations draw from them. The spacers live in ``cache`` as long as the calls."""
    out = [rows]
    for p in range(1, ROW_PLACEMENTS):
        cache[("grouped_rows_spacer", rotation, p)] = torch.empty(SPACER_BYTES * (2 * p + 1), dtype=torch.uint8,
                                                                  device=dev)
        out.append(rows.clone())
    return out


def build(torch: Any, spec: Spec, dev: Any, l2_bytes: int, cache: dict[Any, Any]) -> list[Call]:
    """Callables for ``spec``, one per buffer rotation; each issues exactly the spec's torch op(s)."""
    op = spec["op"]
    bf = torch.bfloat16
    if op == "chain":
        subs = [build(torch, s, dev, l2_bytes, cache) for s in spec["ops"]]
        n = max(len(s) for s in subs)

        def chain_call(r: int) -> Call:
            parts = [s[r % len(s)] for s in subs]
            return lambda: [p() for p in parts]

        return [chain_call(r) for r in range(n)]
    rot = rotations(spec, l2_bytes)
    calls: list[Call] = []
    if op == "mm":
        m, k, n = spec["M"], spec["K"], spec["N"]
        for _ in range(rot):
            x, w, o = _rand(torch, (m, k), bf, dev), _rand(torch, (k, n), bf, dev), torch.empty((m, n), dtype=bf,
                                                                                                 device=dev)
            calls.append(lambda x=x, w=w, o=o: torch.mm(x, w, out=o))
    elif op == "mm_f32":
        m, k, n, f32 = spec["M"], spec["K"], spec["N"], torch.float32
        for _ in range(rot):
            x, w, o = _rand(torch, (m, k), f32, dev), _rand(torch, (k, n), f32, dev), torch.empty((m, n), dtype=f32,
                                                                                                  device=dev)
            calls.append(lambda x=x, w=w, o=o: torch.mm(x, w, out=o))
    elif op == "grouped_mm":
        e, k, n = spec["E"], spec["K"], spec["N"]
        legacy = spec.get("weights") == LEGACY_GROUPED_WEIGHTS
        key = ("grouped_w", e, k, n, legacy)
        if key not in cache:  # stored [E, N, K] and passed transposed, as kernels_real's layer holds its experts
            cache[key] = _rand(torch, (e, k, n) if legacy else (e, n, k), bf, dev)
        w = cache[key] if legacy else cache[key].transpose(1, 2)
        for r in range(rot):
            counts = spec["counts"] if r == 0 else route_counts(spec["tokens"], e, spec["top_k"], seed=r)
            offs = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(device=dev, dtype=torch.int32)
            x = _rand(torch, (sum(counts), k), bf, dev)
            for rows in row_placements(torch, x, dev, cache, r):
                calls.append(lambda x=rows, offs=offs: torch._grouped_mm(x, w, offs=offs))
    elif op in ("add", "mul"):
        fn = torch.add if op == "add" else torch.mul
        for _ in range(rot):
            a, b = _rand(torch, (spec["M"], spec["N"]), bf, dev), _rand(torch, (spec["M"], spec["N"]), bf, dev)
            o = torch.empty_like(a)
            calls.append(lambda a=a, b=b, o=o: fn(a, b, out=o))
    elif op == "silu":
        silu_out = torch.ops.aten.silu.out
        for _ in range(rot):
            a = _rand(torch, (spec["M"], spec["N"]), bf, dev)
            o = torch.empty_like(a)
            calls.append(lambda a=a, o=o: silu_out(a, out=o))
    elif op in ("silu_half", "mul_half"):  # one half of [M, 2N], as kernels_real's silu_and_mul reads it
        m, n = spec["M"], spec["N"]
        silu_out = torch.ops.aten.silu.out
        for _ in range(rot):
            h, a, o = _rand(torch, (m, 2 * n), bf, dev), _rand(torch, (m, n), bf, dev), torch.empty((m, n), dtype=bf,
                                                                                                    device=dev)
            calls.append((lambda h=h, o=o: silu_out(h[:, :n], out=o)) if op == "silu_half"
                         else (lambda h=h, a=a, o=o: torch.mul(a, h[:, n:], out=o)))
    elif op in ("softmax", "sigmoid"):
        softmax_out = torch.ops.aten._softmax.out
        for _ in range(rot):
            lg = _rand(torch, (spec["M"], spec["E"]), torch.float32, dev)
            o = torch.empty_like(lg)
            calls.append((lambda lg=lg, o=o: softmax_out(lg, -1, False, out=o)) if op == "softmax"
                         else (lambda lg=lg, o=o: torch.sigmoid(lg, out=o)))
    elif op == "scatter_add":
        for _ in range(rot):
            ids = torch.randint(0, spec["E"], (spec["n"],), dtype=torch.int64, device=dev)
            ones = torch.ones((spec["n"],), dtype=torch.int32, device=dev)
            counts = torch.zeros((spec["E"],), dtype=torch.int32, device=dev)
            calls.append(lambda ids=ids, ones=ones, c=counts: c.scatter_add_(0, ids, ones))
    elif op == "cumsum":
        for _ in range(rot):
            counts = torch.randint(0, 16, (spec["E"],), dtype=torch.int32, device=dev)
            o = torch.empty_like(counts)
            calls.append(lambda c=counts, o=o: torch.cumsum(c, 0, dtype=torch.int32, out=o))
    elif op == "index_add":
        m, k, n = spec["M"], spec["k"], spec["N"]
        for _ in range(rot):
            out = torch.zeros((m, n), dtype=torch.float32, device=dev)
            idx = torch.randint(0, m, (m * k,), dtype=torch.int64, device=dev)
            src = _rand(torch, (m * k, n), torch.float32, dev)
            calls.append(lambda o=out, idx=idx, src=src: o.index_add_(0, idx, src))
    elif op == "topk":
        srt = bool(spec.get("sorted", False))
        for _ in range(rot):
            logits = _rand(torch, (spec["M"], spec["E"]), torch.float32, dev)
            vals = torch.empty((spec["M"], spec["k"]), dtype=torch.float32, device=dev)
            idx = torch.empty((spec["M"], spec["k"]), dtype=torch.int64, device=dev)
            calls.append(lambda lg=logits, v=vals, i=idx: torch.topk(lg, spec["k"], dim=-1, sorted=srt, out=(v, i)))
    elif op == "sort":
        for _ in range(rot):
            ids = torch.randint(0, spec.get("E", 1 << 16), (spec["n"],), dtype=torch.int64, device=dev)
            vals, idx = torch.empty_like(ids), torch.empty_like(ids)
            calls.append(lambda ids=ids, v=vals, i=idx: torch.sort(ids, stable=True, out=(v, i)))
    elif op == "sum_k":
        m, k, n = spec["M"], spec["k"], spec["N"]
        for _ in range(rot):
            x, o = _rand(torch, (m, k, n), bf, dev), torch.empty((m, n), dtype=bf, device=dev)
            calls.append(lambda x=x, o=o: torch.sum(x, dim=1, out=o))
    elif op == "index_select":
        m, k, n = spec["M"], spec["k"], spec["N"]
        for _ in range(rot):
            x = _rand(torch, (m, n), bf, dev)
            idx = torch.randint(0, m, (m * k,), dtype=torch.int64, device=dev)
            o = torch.empty((m * k, n), dtype=bf, device=dev)
            calls.append(lambda x=x, idx=idx, o=o: torch.index_select(x, 0, idx, out=o))
    elif op == "copy":
        elems = spec["bytes"] // 2
        for _ in range(rot):
            src, dst = _rand(torch, (elems,), bf, dev), torch.empty((elems,), dtype=bf, device=dev)
            calls.append(lambda s=src, d=dst: d.copy_(s))
    else:
        raise ValueError(f"unknown op {op!r}")
    return calls


def weight_key(spec: Spec) -> Any:
    """Key of the big tensors a spec shares with its neighbours (solo items with one key reuse the cache)."""
    if spec["op"] == "grouped_mm":
        return ("grouped_w", spec["E"], spec["K"], spec["N"], spec.get("weights") == LEGACY_GROUPED_WEIGHTS)
    return None
