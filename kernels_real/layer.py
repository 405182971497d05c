"""The MoE layer, scheduled as vLLM schedules it, with three strategies.

Per-kernel work follows vLLM: gate GEMM, routing top-k, token sort/permute, grouped GEMM gate_up,
SiLU-and-mul, grouped GEMM down, weighted combine (index_add); shared expert = gate_up GEMM, SiLU-and-mul,
down GEMM (Qwen2: times a sigmoid gate); final add. The forward never synchronises the host on CUDA
(counts via scatter_add), so it can be captured in a CUDA graph. ``record_function`` ranges ``moe.gate``,
``moe.routed_experts`` and ``moe.shared_experts`` let Kineto traces be sliced by region.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.profiler import record_function

from kernels_real.config import ConfigError, MoEConfig, NotApplicableError
from kernels_real.grouped_gemm import grouped_mm, make_groups, select_backend
from kernels_real.routing import route
from kernels_real.streams import MICRO_BATCHES, make_event_pairs


@dataclass
class MoEWeights:
    """One weight set. ``w13``/``w2`` hold the routed experts followed by the shared MLP's fused chunks."""

    gate: torch.Tensor  # float32 [E, H] (router GEMM in float32, as DeepSeek's router GEMM outputs fp32)
    bias: torch.Tensor | None  # float32 [E], grouped_sigmoid only
    w13: torch.Tensor  # [E + S, 2I, H]: gate rows then up rows, nn.Linear layout
    w2: torch.Tensor  # [E + S, H, I]
    shared_w13: torch.Tensor | None  # [2 * I_shared, H]
    shared_w2: torch.Tensor | None  # [H, I_shared]
    shared_gate: torch.Tensor | None  # [1, H], Qwen2 only

    @classmethod
    def random(cls, cfg: MoEConfig, device: torch.device | str, seed: int = 0) -> MoEWeights:
        """Random (never zero) weights scaled so activations stay O(1)."""
        device = torch.device(device)
        dtype = getattr(torch, cfg.dtype)
        gen = torch.Generator(device=device).manual_seed(seed)
        h, i, e, s = cfg.hidden, cfg.moe_intermediate, cfg.n_experts, cfg.fused_shared_chunks

        def randn(*shape: int, scale: float, dt: torch.dtype = dtype) -> torch.Tensor:
            return torch.randn(*shape, generator=gen, device=device, dtype=dt).mul_(scale)

        gate, bias = _draw_router(cfg, gen, device)
        w13 = randn(e + s, 2 * i, h, scale=h**-0.5)
        w2 = randn(e + s, h, i, scale=i**-0.5)
        shared_w13 = shared_w2 = shared_gate = None
        if cfg.has_shared:
            ish = cfg.shared_total
            shared_w13 = randn(2 * ish, h, scale=h**-0.5)
            shared_w2 = randn(h, ish, scale=ish**-0.5)
            if s:  # the same shared MLP, split into s experts of the routed intermediate size
                w13[e:, :i] = shared_w13[:ish].view(s, i, h)
                w13[e:, i:] = shared_w13[ish:].view(s, i, h)
                w2[e:] = shared_w2.view(h, s, i).permute(1, 0, 2)
            if cfg.shared_gate:
                shared_gate = randn(1, h, scale=h**-0.5)
        return cls(gate, bias, w13, w2, shared_w13, shared_w2, shared_gate)


def _draw_router(cfg: MoEConfig, gen: torch.Generator,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A weight set's router gate and correction bias: the first draws of its generator."""
    h, e = cfg.hidden, cfg.n_experts
    gate = torch.randn(e, h, generator=gen, device=device, dtype=torch.float32).mul_(h**-0.5)
    if cfg.router != "grouped_sigmoid":
        return gate, None
    return gate, torch.randn(e, generator=gen, device=device, dtype=torch.float32).mul_(0.1)


def router_weights(cfg: MoEConfig, device: torch.device | str, seed: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The gate and bias ``MoEWeights.random(cfg, device, seed)`` holds, drawn without the expert weights (the
    same generator calls, so the same values on the same device and torch)."""
    device = torch.device(device)
    return _draw_router(cfg, torch.Generator(device=device).manual_seed(seed), device)


def silu_and_mul(h: torch.Tensor) -> torch.Tensor:
    """SiLU of the first half times the second half (last dimension)."""
    half = h.shape[-1] // 2
    return F.silu(h[..., :half]) * h[..., half:]


class MoELayer:
    """The layer's kernels and streams; weights are passed per call so a bench can rotate weight sets."""

    def __init__(
        self, cfg: MoEConfig, device: torch.device | str = "cpu", backend: str | None = None,
        router_delay_cycles: int = 0, shared_first: bool = True,
    ) -> None:
        """``router_delay_cycles``: multi_stream only, a spin kernel of that many GPU clock cycles on the main
        stream after the fork, ahead of the routing head (0: none): the knob ``kernels_real.spacer_probe`` times
        (the branch probe of calls 36-37 found a microsecond there changing how some co-runs share the SMs).
        ``shared_first``: multi_stream enqueues the shared experts on aux before the routed path (as vLLM does;
        default) or after it (the other capture order, same dependencies)."""
        if router_delay_cycles < 0:
            raise ConfigError(f"router_delay_cycles must be >= 0, got {router_delay_cycles}")
        self.router_delay_cycles = router_delay_cycles
        self.shared_first = shared_first
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype: torch.dtype = getattr(torch, cfg.dtype)
        self.backend = backend or select_backend(self.device, self.dtype)
        if self.backend == "loop" and self.device.type != "cpu":
            raise ConfigError("the 'loop' grouped GEMM backend synchronises the host: CPU only")
        self.on_gpu = self.device.type == "cuda"
        self.aux = torch.cuda.Stream(self.device) if self.on_gpu else None
        self.events = make_event_pairs() if self.on_gpu else None
        s = cfg.fused_shared_chunks
        self._shared_ids = torch.arange(cfg.n_experts, cfg.n_experts + s, device=self.device)

    def __call__(
        self, x: torch.Tensor, w: MoEWeights, strategy: str = "sequential", ubatch: int = 0
    ) -> torch.Tensor:
        """The layer output for hidden states ``x`` ([tokens, hidden]) under ``strategy``."""
        self._check(x, strategy, ubatch)
        if strategy == "sequential":
            shared = self._shared(x, w) if self.cfg.has_shared else None
            routed = self._routed(x, w)
            return routed if shared is None else routed + shared
        if strategy == "multi_stream":
            return self._multi_stream(x, w, ubatch, inplace_race=False)
        return self._fused(x, w)

    def unsafe_inplace_demo(self, x: torch.Tensor, w: MoEWeights, ubatch: int = 0) -> torch.Tensor:
        """multi_stream, but main scales the routed input in place while aux reads it (the seed-000 race).

        For the CUDA-sanitizer demonstration only: the result is wrong whenever the race bites.
        """
        self._check(x, "multi_stream", ubatch)
        return self._multi_stream(x, w, ubatch, inplace_race=True)

    def _check(self, x: torch.Tensor, strategy: str, ubatch: int) -> None:
        reason = self.cfg.applicable(strategy)
        if reason:
            raise NotApplicableError(reason)
        if x.dim() != 2 or x.shape[1] != self.cfg.hidden or x.shape[0] < 1:
            raise ConfigError(f"{self.cfg.name}: input must be [tokens >= 1, {self.cfg.hidden}], "
                              f"got {list(x.shape)}")
        if x.dtype != self.dtype:
            raise ConfigError(f"{self.cfg.name}: input dtype {x.dtype} != layer dtype {self.dtype}")
        if x.device.type != self.device.type:
            raise ConfigError(f"{self.cfg.name}: input on {x.device}, layer on {self.device}")
        if not 0 <= ubatch < MICRO_BATCHES:
            raise ConfigError(f"micro-batch index {ubatch} outside 0..{MICRO_BATCHES - 1}")

    def _multi_stream(self, x: torch.Tensor, w: MoEWeights, ubatch: int, inplace_race: bool) -> torch.Tensor:
        if not self.on_gpu:  # no streams on CPU: same issue order, one stream
            shared = self._shared(x, w)
            return self._routed(x, w) + shared
        main = torch.cuda.current_stream(self.device)
        pair = self.events[ubatch]
        pair.input_ready.record(main)

        def shared_on_aux() -> torch.Tensor:
            with torch.cuda.stream(self.aux):
                self.aux.wait_event(pair.input_ready)
                out = self._shared(x, w)
                pair.output_ready.record(self.aux)
            return out

        shared = shared_on_aux() if self.shared_first else None
        if inplace_race:
            x.mul_(0.5)  # e.g. an in-place scaling of the routed input, unordered with aux's reads
        if self.router_delay_cycles:
            torch.cuda._sleep(self.router_delay_cycles)
        routed = self._routed(x, w)
        if shared is None:
            shared = shared_on_aux()
        main.wait_event(pair.output_ready)
        return routed + shared

    def _gate(self, x: torch.Tensor, w: MoEWeights) -> tuple[torch.Tensor, torch.Tensor]:
        with record_function("moe.gate"):
            logits = F.linear(x.float(), w.gate)
            return route(logits, self.cfg, w.bias)

    def _routed(self, x: torch.Tensor, w: MoEWeights) -> torch.Tensor:
        ids, weights = self._gate(x, w)
        with record_function("moe.routed_experts"):
            return self._experts(x, ids, weights, w, self.cfg.n_experts)

    def _fused(self, x: torch.Tensor, w: MoEWeights) -> torch.Tensor:
        ids, weights = self._gate(x, w)
        tokens, s = x.shape[0], self.cfg.fused_shared_chunks
        if w.shared_gate is not None:
            with record_function("moe.gate"):
                shared_weight = torch.sigmoid(F.linear(x, w.shared_gate).float()).expand(tokens, s)
        else:
            shared_weight = weights.new_ones(tokens, s)
        with record_function("moe.routed_experts"):
            ids = torch.cat([ids, self._shared_ids.expand(tokens, s)], dim=1)
            weights = torch.cat([weights, shared_weight], dim=1)
            return self._experts(x, ids, weights, w, self.cfg.n_experts + s)

    def _experts(
        self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, w: MoEWeights, n_groups: int
    ) -> torch.Tensor:
        tokens, k = ids.shape
        order, groups = make_groups(ids.reshape(-1), n_groups, capacity=tokens)
        token = order // k
        h = grouped_mm(x.index_select(0, token), w.w13[:n_groups], groups, self.backend)
        y = grouped_mm(silu_and_mul(h), w.w2[:n_groups], groups, self.backend)
        scale = weights.reshape(-1).index_select(0, order).unsqueeze(1)
        out = torch.zeros(tokens, x.shape[1], dtype=torch.float32, device=x.device)
        return out.index_add_(0, token, y.float() * scale).to(x.dtype)

    def _shared(self, x: torch.Tensor, w: MoEWeights) -> torch.Tensor:
        with record_function("moe.shared_experts"):
            y = F.linear(silu_and_mul(F.linear(x, w.shared_w13)), w.shared_w2)
            if w.shared_gate is not None:
                y = y * torch.sigmoid(F.linear(x, w.shared_gate))
            return y
