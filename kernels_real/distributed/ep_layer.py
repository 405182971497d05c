"""The DP-attention + EP variant: each rank brings its own tokens, owns ``E/ep`` experts, and sends every
routed row to its expert's owner (dispatch, all-to-all) and the results back (combine, all-to-all).

Per rank and call: gate + routing on its own tokens (replicated gate weights); rows sorted by destination
rank; dispatch of the rows and their local expert ids; the owner's grouped GEMMs over its experts; combine;
the source weights and sums its rows (float32 ``index_add_``, as the single-GPU layer). The shared experts
are replicated and run on the rank's own tokens: ``multi_stream`` enqueues them on the aux stream before the
dispatch (event pair, as on one GPU), so they overlap dispatch + routed experts + combine; main waits on
them after the combine. ``sequential``: shared experts first, on main. ``fused_shared`` is not implemented
for EP (the shared chunks would be replicated per rank and never travel).

Two dispatch forms:

- ``exact``: the per-destination row counts are exchanged first (an all-to-all of ``ep`` integers) and read
  on the host (``.tolist()``: a device sync), then ``all_to_all_single`` with those split sizes. Not graph
  capturable (host sync, shapes that change per call).
- ``padded`` (default): a fixed capacity ``C`` rows per (source, destination) pair, known on the host before
  the call: the send buffer is ``[ep·C, hidden]`` (zero rows where a destination gets fewer than ``C``),
  every split is ``C``, so no sizes are exchanged and no host sync happens: graph capturable. Receivers mark
  padding rows with a sentinel expert id and leave them out of the grouped GEMM (they ride along in the last
  group only for the ``padded_bmm`` backend, as zero rows). ``C`` defaults to the bound that never drops
  a row, ``max_tokens × min(top_k, E/ep)`` (a token picks each expert once); a smaller ``capacity`` drops
  the rows past ``C`` of a destination (in token order, as GShard's capacity does) and counts them in
  ``last_dropped`` (a device tensor, read only when wanted). All ranks must use the same ``max_tokens``
  (serving engines pad DP batches to a common size for graphs); each rank's ``x`` may hold fewer tokens.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.profiler import record_function

from kernels_real.config import ConfigError, MoEConfig, NotApplicableError
from kernels_real.distributed.parallel import Dist, shard
from kernels_real.grouped_gemm import Groups, grouped_mm, make_groups
from kernels_real.layer import MoELayer, MoEWeights, silu_and_mul

DISPATCH = ("padded", "exact")


def shard_weights_ep(cfg: MoEConfig, w: MoEWeights, rank: int, ep: int) -> MoEWeights:
    """Rank ``rank``'s experts ``rank·E/ep .. (rank+1)·E/ep`` (no fused shared chunks); gate and shared MLP
    replicated."""
    part = shard(cfg.n_experts, rank, ep, f"{cfg.name}: n_experts")
    return MoEWeights(gate=w.gate, bias=w.bias, w13=w.w13[part].contiguous(), w2=w.w2[part].contiguous(),
                      shared_w13=w.shared_w13, shared_w2=w.shared_w2, shared_gate=w.shared_gate)


def random_ep_weights(cfg: MoEConfig, d: Dist, seed: int) -> MoEWeights:
    """This rank's shard of ``MoEWeights.random(cfg, seed=seed)`` (the full set is built on the device,
    then freed: peak memory is the full set plus the shard)."""
    return shard_weights_ep(cfg, MoEWeights.random(cfg, d.device, seed=seed), d.rank, d.world)


def capacity_bound(cfg: MoEConfig, ep: int, max_tokens: int) -> int:
    """Most rows one rank can send to one destination: each token picks each expert at most once."""
    return max_tokens * min(cfg.top_k, cfg.n_experts // ep)


class EPMoELayer:
    """One rank of the DP-attention + EP MoE layer; ``__call__(x, w_shard, strategy)`` returns the output
    for this rank's own tokens."""

    def __init__(self, cfg: MoEConfig, d: Dist, max_tokens: int, dispatch: str = "padded",
                 capacity: int | None = None, backend: str | None = None) -> None:
        if dispatch not in DISPATCH:
            raise ConfigError(f"unknown dispatch {dispatch!r}; known: {', '.join(DISPATCH)}")
        shard(cfg.n_experts, d.rank, d.world, f"{cfg.name}: n_experts")
        if max_tokens < 1 or (capacity is not None and capacity < 1):
            raise ConfigError("max_tokens and capacity must be >= 1")
        self.cfg, self.dist, self.dispatch, self.max_tokens = cfg, d, dispatch, max_tokens
        self.n_local = cfg.n_experts // d.world
        self.capacity = capacity or capacity_bound(cfg, d.world, max_tokens)
        self.local = MoELayer(cfg, d.device, backend)  # the gate, the shared MLP, the aux stream, the events
        self.backend = self.local.backend
        self.last_dropped: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor, w: MoEWeights, strategy: str = "sequential", ubatch: int = 0
                 ) -> torch.Tensor:
        if strategy == "fused_shared":
            raise NotApplicableError("fused_shared is not implemented for DP attention + EP")
        self.local._check(x, strategy, ubatch)
        if w.w13.shape[0] != self.n_local:
            raise ConfigError(f"weights hold {w.w13.shape[0]} experts; this rank owns {self.n_local}")
        if x.shape[0] > self.max_tokens:
            raise ConfigError(f"{x.shape[0]} tokens exceed max_tokens={self.max_tokens}")
        if not self.cfg.has_shared:
            return self._routed(x, w)
        if strategy == "multi_stream" and self.local.on_gpu:
            main = torch.cuda.current_stream(self.dist.device)
            pair = self.local.events[ubatch]
            pair.input_ready.record(main)
            with torch.cuda.stream(self.local.aux):
                self.local.aux.wait_event(pair.input_ready)
                shared = self.local._shared(x, w)
                pair.output_ready.record(self.local.aux)
            routed = self._routed(x, w)
            main.wait_event(pair.output_ready)
            return routed + shared
        shared = self.local._shared(x, w)  # sequential (and multi_stream on CPU: no streams, same order)
        return self._routed(x, w) + shared

    def _routed(self, x: torch.Tensor, w: MoEWeights) -> torch.Tensor:
        ids, weights = self.local._gate(x, w)
        tokens, k = ids.shape
        flat = ids.reshape(-1)
        dest = torch.div(flat, self.n_local, rounding_mode="floor")
        order = torch.sort(dest, stable=True).indices  # rows grouped by destination, token order kept
        token = torch.div(order, k, rounding_mode="floor")
        local_id = (flat - dest * self.n_local).index_select(0, order)
        counts = torch.zeros(self.dist.world, dtype=torch.int64, device=x.device)
        counts.scatter_add_(0, dest, torch.ones_like(dest))
        scale = weights.reshape(-1).index_select(0, order).unsqueeze(1)
        if self.dispatch == "exact":
            back = self._exact(x.index_select(0, token), local_id, counts, w)
            contrib = back.float() * scale
        else:
            back, keep = self._padded(x, token, local_id, dest.index_select(0, order), counts, w)
            contrib = torch.where(keep.unsqueeze(1), back.float() * scale, 0.0)
        out = torch.zeros(tokens, x.shape[1], dtype=torch.float32, device=x.device)
        return out.index_add_(0, token, contrib).to(x.dtype)

    def _exact(self, rows: torch.Tensor, local_id: torch.Tensor, counts: torch.Tensor, w: MoEWeights
               ) -> torch.Tensor:
        """Dispatch with exchanged split sizes (host sync), experts, combine; rows back in sent order."""
        recv_counts = torch.empty_like(counts)
        with record_function("moe.dispatch"):
            dist.all_to_all_single(recv_counts, counts)
            send, recv = counts.tolist(), recv_counts.tolist()  # host sync: not graph capturable
            recv_rows = rows.new_empty(sum(recv), rows.shape[1])
            dist.all_to_all_single(recv_rows, rows, recv, send)
            recv_ids = local_id.new_empty(sum(recv))
            dist.all_to_all_single(recv_ids, local_id, recv, send)
        y = self._experts(recv_rows, recv_ids, w)
        with record_function("moe.combine"):
            back = rows.new_empty(rows.shape)
            dist.all_to_all_single(back, y, send, recv)
        return back

    def _padded(self, x: torch.Tensor, token: torch.Tensor, local_id: torch.Tensor, sorted_dest: torch.Tensor,
                counts: torch.Tensor, w: MoEWeights) -> tuple[torch.Tensor, torch.Tensor]:
        """Fixed-capacity dispatch, experts, combine (no host sync); each sent row's result and whether it
        was kept (False: dropped for lack of capacity)."""
        cap, world = self.capacity, self.dist.world
        n_slots = world * cap
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(token.shape[0], device=x.device) - starts.index_select(0, sorted_dest)
        keep = slot < cap
        pos = sorted_dest * cap + slot.clamp(max=cap - 1)
        target = torch.where(keep, pos, n_slots)  # dropped rows go to a trash row past the sent buffer
        self.last_dropped = (~keep).sum()
        with record_function("moe.dispatch"):
            send_rows = x.new_zeros(n_slots + 1, x.shape[1]).index_copy_(0, target, x.index_select(0, token))
            send_ids = torch.full((n_slots + 1,), self.n_local, dtype=torch.int64, device=x.device)
            send_ids.index_copy_(0, target, local_id)
            recv_rows = x.new_empty(n_slots, x.shape[1])
            dist.all_to_all_single(recv_rows, send_rows[:n_slots])
            recv_ids = send_ids.new_empty(n_slots)
            dist.all_to_all_single(recv_ids, send_ids[:n_slots])
        y = self._experts(recv_rows, recv_ids, w)
        with record_function("moe.combine"):
            back = torch.empty_like(y)
            dist.all_to_all_single(back, y)
        return back.index_select(0, pos), keep

    def _experts(self, rows: torch.Tensor, local_id: torch.Tensor, w: MoEWeights) -> torch.Tensor:
        """Each received row through its local expert (unweighted), in received order. Rows with the
        sentinel id ``n_local`` (padding) are left out of the groups: their results are undefined."""
        n, m = self.n_local, rows.shape[0]
        with record_function("moe.routed_experts"):
            order, g = make_groups(local_id, n + 1, capacity=m)
            groups = Groups(g.row_group.clamp(max=n - 1), g.counts[:n], g.offsets[:n], m)
            h = grouped_mm(rows.index_select(0, order), w.w13, groups, self.backend)
            y = grouped_mm(silu_and_mul(h), w.w2, groups, self.backend)
            return torch.empty_like(y).index_copy_(0, order, y)
