"""Grouped GEMM over expert-sorted rows, with three backends.

``grouped_mm``: ``torch._grouped_mm`` (one kernel; CUDA sm90+ bf16, also available on CPU in recent torch).
``padded_bmm``: portable GPU path (ROCm, pre-Hopper): rows scattered into a [groups, capacity, K] buffer, one
``bmm``, rows gathered back. No host synchronisation, so it is CUDA/HIP-graph capturable; it wastes flops
(groups × capacity rows) and is a fallback, not a fast path.
``loop``: sorted per-expert loop with the group sizes read on the host (CPU only: it synchronises).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BACKENDS: tuple[str, ...] = ("grouped_mm", "padded_bmm", "loop")


def select_backend(device: torch.device, dtype: torch.dtype) -> str:
    """The fastest sync-free backend for this device and dtype."""
    if device.type != "cuda":
        return "loop"
    hopper = torch.version.hip is None and torch.cuda.get_device_capability(device) >= (9, 0)
    if hopper and dtype == torch.bfloat16 and hasattr(torch, "_grouped_mm"):
        return "grouped_mm"
    return "padded_bmm"


@dataclass(frozen=True)
class Groups:
    """Rows sorted by group: each row's group id, group sizes, cumulative ends and per-group capacity."""

    row_group: torch.Tensor  # int64 [M], non-decreasing
    counts: torch.Tensor  # int32 [G]
    offsets: torch.Tensor  # int32 [G], cumulative ends
    capacity: int  # upper bound on any group's size (host-known, e.g. the token count)

    @property
    def n_groups(self) -> int:
        return self.counts.shape[0]


def make_groups(flat_ids: torch.Tensor, n_groups: int, capacity: int) -> tuple[torch.Tensor, Groups]:
    """Stable sort of flat expert ids; returns the sort order and the groups (counts via scatter_add)."""
    sorted_ids, order = torch.sort(flat_ids, stable=True)
    ones = torch.ones_like(flat_ids, dtype=torch.int32)
    counts = torch.zeros(n_groups, dtype=torch.int32, device=flat_ids.device).scatter_add_(0, flat_ids, ones)
    offsets = torch.cumsum(counts, 0, dtype=torch.int32)
    return order, Groups(sorted_ids, counts, offsets, capacity)


def grouped_mm(a: torch.Tensor, w: torch.Tensor, groups: Groups, backend: str) -> torch.Tensor:
    """Row ``i`` of ``a`` ([M, K], sorted by group) times ``w[group(i)].T`` (``w``: [G, N, K]); [M, N]."""
    if backend == "grouped_mm":
        return torch._grouped_mm(a, w.transpose(1, 2), offs=groups.offsets)
    if backend == "padded_bmm":
        return _padded_bmm(a, w, groups)
    if backend == "loop":
        return _loop(a, w, groups)
    raise ValueError(f"unknown grouped GEMM backend {backend!r}; known: {', '.join(BACKENDS)}")


def _padded_bmm(a: torch.Tensor, w: torch.Tensor, groups: Groups) -> torch.Tensor:
    starts = groups.offsets - groups.counts
    rows = torch.arange(a.shape[0], device=a.device)
    slot = rows - starts[groups.row_group].long()
    padded = a.new_zeros(groups.n_groups, groups.capacity, a.shape[1])
    padded[groups.row_group, slot] = a
    out = torch.bmm(padded, w.transpose(1, 2))
    return out[groups.row_group, slot]


def _loop(a: torch.Tensor, w: torch.Tensor, groups: Groups) -> torch.Tensor:
    out = a.new_empty(a.shape[0], w.shape[1])
    start = 0
    for g, n in enumerate(groups.counts.tolist()):
        if n:
            out[start:start + n] = a[start:start + n] @ w[g].T
        start += n
    return out
