"""Serving-engine-shaped fixtures: a small decoder stack as ``nn.Module`` s named like vLLM's DeepSeek-V2 code,
profiled the way vLLM's profiler records (``with_stack=True, with_modules=True``, no ``record_function`` ranges).

``DeepseekV2ForCausalLM`` > ``DeepseekV2Model`` > ``DeepseekV2DecoderLayer`` × (1 dense + ``--moe-layers``);
each decoder layer is ``RMSNorm`` then its MLP plus the residual (attention is left out: the what-if moves the
shared experts, and the layers around them carry kernels enough). The dense layer's MLP and every MoE layer's
``shared_experts`` are ``DeepseekV2MLP`` (``gate_up_proj`` / ``act_fn`` / ``down_proj``); ``DeepseekV2MoE``
holds ``gate`` (``ReplicatedLinear``, float32 router logits), ``shared_experts`` and ``experts`` (``FusedMoE``:
routing and the grouped experts of :class:`kernels_real.layer.MoELayer`). ``multi_stream`` runs the shared
experts on the layer's aux stream between its event pair, as vLLM does; ``sequential`` on the main stream.

``python -m kernels_real.serving_fixture --out DIR`` writes ``DIR/<strategy>_<mode>.json.gz`` (eager and, on
a GPU, CUDA-graph traces of ``--steps`` forward calls; metadata ``moesim_layers_per_trace`` = forward calls,
so the what-if's per-layer figures are per forward call) and ``DIR/fixture.json``: per strategy and mode the
forward time measured with CUDA events in the same run (medians over interleaved rounds) and the provenance
(date, GPU, driver, torch). On CPU: tiny shapes, eager only, no timing (the traces carry no kernels; they are
for the module structure). Only ``torch.cuda`` APIs that HIP builds provide are used; ROCm was not run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from kernels_real.bench import run_env
from kernels_real.config import ConfigError, MoEConfig, get_preset
from kernels_real.layer import MoELayer, MoEWeights, silu_and_mul
from kernels_real.profiling import chrome_trace
from kernels_real.routing import route
from kernels_real.timing import time_steps

STRATEGIES = ("sequential", "multi_stream")
DENSE_FACTOR = 8  # dense MLP intermediate = 8 × the routed one (DeepSeek-V2-Lite: 10944 vs 1408)


class MergedColumnParallelLinear(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class RowParallelLinear(MergedColumnParallelLinear):
    pass


class ReplicatedLinear(MergedColumnParallelLinear):
    """The router: float32 logits, as DeepSeek's router GEMM."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.float(), self.weight)


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight = torch.ones(hidden, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class DeepseekV2MLP(nn.Module):
    def __init__(self, w13: torch.Tensor, w2: torch.Tensor) -> None:
        super().__init__()
        self.gate_up_proj = MergedColumnParallelLinear(w13)
        self.act_fn = SiluAndMul()
        self.down_proj = RowParallelLinear(w2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class FusedMoE(nn.Module):
    """Routing and the routed experts (``MoELayer``'s kernels: sort, gather, grouped GEMMs, weighted combine)."""

    def __init__(self, kernels: MoELayer, weights: MoEWeights) -> None:
        super().__init__()
        self.kernels, self.w = kernels, weights

    def forward(self, hidden_states: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        cfg = self.kernels.cfg
        ids, weights = route(router_logits, cfg, self.w.bias)
        return self.kernels._experts(hidden_states, ids, weights, self.w, cfg.n_experts)


class DeepseekV2MoE(nn.Module):
    def __init__(self, kernels: MoELayer, weights: MoEWeights, strategy: str) -> None:
        super().__init__()
        assert weights.shared_w13 is not None and weights.shared_w2 is not None
        self.kernels, self.strategy = kernels, strategy
        self.gate = ReplicatedLinear(weights.gate)
        self.shared_experts = DeepseekV2MLP(weights.shared_w13, weights.shared_w2)
        self.experts = FusedMoE(kernels, weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        aux = self.kernels.aux
        if self.strategy == "sequential" or aux is None:  # CPU: one stream, same issue order
            shared = self.shared_experts(x)
            return self.experts(x, self.gate(x)) + shared
        main = torch.cuda.current_stream(x.device)
        pair = self.kernels.events[0]
        pair.input_ready.record(main)
        with torch.cuda.stream(aux):
            aux.wait_event(pair.input_ready)
            shared = self.shared_experts(x)
            pair.output_ready.record(aux)
        routed = self.experts(x, self.gate(x))
        main.wait_event(pair.output_ready)
        return routed + shared


class DeepseekV2DecoderLayer(nn.Module):
    def __init__(self, mlp: nn.Module, hidden: int, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.post_attention_layernorm = RMSNorm(hidden, device, dtype)
        self.mlp = mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.post_attention_layernorm(x))


class DeepseekV2Model(nn.Module):
    def __init__(self, layers: list[DeepseekV2DecoderLayer], hidden: int, device: torch.device,
                 dtype: torch.dtype) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(hidden, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class DeepseekV2ForCausalLM(nn.Module):
    def __init__(self, model: DeepseekV2Model) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def build(cfg: MoEConfig, moe_layers: int, strategy: str, device: torch.device,
          kernels: MoELayer | None = None) -> DeepseekV2ForCausalLM:
    """The stack: one dense layer, then ``moe_layers`` MoE layers with their own random weights (seeded)."""
    if not cfg.has_shared:
        raise ConfigError(f"{cfg.name} has no shared experts: nothing to move")
    kernels = kernels or MoELayer(cfg, device)
    dtype = kernels.dtype
    gen = torch.Generator(device=device).manual_seed(1)
    dense = cfg.moe_intermediate * DENSE_FACTOR
    w13 = torch.randn(2 * dense, cfg.hidden, generator=gen, device=device, dtype=dtype).mul_(cfg.hidden**-0.5)
    w2 = torch.randn(cfg.hidden, dense, generator=gen, device=device, dtype=dtype).mul_(dense**-0.5)
    layers = [DeepseekV2DecoderLayer(DeepseekV2MLP(w13, w2), cfg.hidden, device, dtype)]
    for n in range(moe_layers):
        moe = DeepseekV2MoE(kernels, MoEWeights.random(cfg, device, seed=10 + n), strategy)
        layers.append(DeepseekV2DecoderLayer(moe, cfg.hidden, device, dtype))
    return DeepseekV2ForCausalLM(DeepseekV2Model(layers, cfg.hidden, device, dtype))


class GraphForward:
    """One replay of a captured forward; keeps the model (its weights) and the captured input and output alive:
    the graph reads and writes them by address."""

    def __init__(self, model: DeepseekV2ForCausalLM, x: torch.Tensor) -> None:
        self.model, self.x = model, x
        for _ in range(2):  # warm-up outside capture (allocator, library handles)
            model(x)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = model(x)

    def __call__(self, i: int = 0) -> None:
        self.graph.replay()


def trace(fn: Callable[[], None], path: Path, meta: dict[str, object], gpu: bool) -> None:
    """Profile ``fn`` as vLLM's profiler does (stack and modules, no shapes) into gzipped ``path``."""
    raw = chrome_trace(fn, gpu, meta, with_stack=True, with_modules=True, record_shapes=False)
    path.write_bytes(gzip.compress(raw, compresslevel=9))


def run(cfg: MoEConfig, tokens: int, moe_layers: int, steps: int, rounds: int, calls: int, out: Path,
        device: torch.device) -> dict[str, object]:
    """Build, time (GPU) and trace every strategy × mode; returns the record written to ``fixture.json``."""
    gpu = device.type == "cuda"
    kernels = MoELayer(cfg, device)
    x = torch.randn(tokens, cfg.hidden, generator=torch.Generator(device=device).manual_seed(0), device=device,
                    dtype=kernels.dtype)
    modes = ("eager", "graph") if gpu else ("eager",)
    cases: dict[str, Callable[[int], object]] = {}
    with torch.no_grad():
        for strategy in STRATEGIES:
            model = build(cfg, moe_layers, strategy, device, kernels)
            cases[f"{strategy}_eager"] = lambda i, m=model: m(x)
            if gpu:
                cases[f"{strategy}_graph"] = GraphForward(model, x)
        for step in cases.values():  # warm-up
            step(0)
            step(1)
        measured: dict[str, object] = {}
        if gpu:
            samples: dict[str, list[float]] = {key: [] for key in cases}
            for _ in range(rounds):  # interleaved: drift hits every case alike
                for key, step in cases.items():
                    samples[key] += time_steps(step, calls, True)
            measured = {key: {"median_us": statistics.median(v), "min_us": min(v), "samples": len(v)}
                        for key, v in samples.items()}
        files = {}
        for key, step in cases.items():
            strategy, mode = key.rsplit("_", 1)
            meta = {"layers_per_trace": steps, "fixture": "serving_fixture", "strategy": strategy, "mode": mode,
                    "preset": cfg.name, "tokens": tokens, "moe_layers": moe_layers,
                    "note": f"{steps} back-to-back forward calls of the decoder stack (1 dense + {moe_layers} MoE "
                            "layers); per-layer figures of the what-if are per forward call"}
            path = out / f"{key}.json.gz"
            trace(lambda s=step: [s(i) for i in range(steps)], path, meta, gpu)
            files[key] = path.name
    return {"preset": cfg.name, "tokens": tokens, "moe_layers": moe_layers, "dense_layers": 1,
            "steps_per_trace": steps, "backend": kernels.backend, "modes": list(modes),
            "strategies": list(STRATEGIES), "traces": files,
            "measured_forward_us": measured or None,
            "timing": (f"CUDA events around each forward call, {rounds} interleaved rounds of {calls} back-to-back "
                       "calls per case, without the profiler, in the same process as the traces") if gpu
            else "none: CPU run (tiny shapes, no timing claims)",
            "profiler": "torch.profiler.profile(with_stack=True, with_modules=True, record_shapes=False), "
                        "no record_function ranges" + (", enable_cuda_sync_events" if gpu else ""),
            "env": run_env(device, "serving_fixture")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.serving_fixture", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="output folder (created)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--preset", default="deepseek_v2_lite", help="MoE shapes (default: deepseek_v2_lite)")
    p.add_argument("--tokens", type=int, default=16, help="tokens per forward (decode batch; default 16)")
    p.add_argument("--moe-layers", type=int, default=3)
    p.add_argument("--steps", type=int, default=4, help="forward calls per trace (default 4)")
    p.add_argument("--rounds", type=int, default=20, help="GPU timing: interleaved rounds (default 20)")
    p.add_argument("--calls", type=int, default=20, help="GPU timing: back-to-back calls per round (default 20)")
    args = p.parse_args(argv)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA/HIP device is visible", file=sys.stderr)
        return 2
    if min(args.tokens, args.moe_layers, args.steps, args.rounds, args.calls) < 1:
        print("error: --tokens, --moe-layers, --steps, --rounds and --calls must be >= 1", file=sys.stderr)
        return 2
    try:
        cfg = get_preset(args.preset)
        if device.type == "cpu":
            cfg = cfg.scaled_down(hidden=64, intermediate=32, max_experts=8)
            args.tokens = min(args.tokens, 4)
        args.out.mkdir(parents=True, exist_ok=True)
        record = run(cfg, args.tokens, args.moe_layers, args.steps, args.rounds, args.calls, args.out, device)
    except (ConfigError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    (args.out / "fixture.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {len(record['traces'])} traces and fixture.json to {args.out}")
    if record["measured_forward_us"]:
        for key, m in record["measured_forward_us"].items():
            print(f"  {key:24s} {m['median_us']:10.2f} µs per forward (median of {m['samples']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
