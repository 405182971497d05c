"""TP and DP-attention + EP layer times, sequential vs multi_stream, at decode token counts.

``torchrun --nproc-per-node N -m kernels_real.distributed.bench_layers --out DIR`` writes (rank 0)
``DIR/cases.json`` (records like ``kernels_real.bench``'s, plus ``parallel``, ``world``, ``dispatch``,
``comm_backend`` and ``rank_medians_us``), ``DIR/env.json`` and ``DIR/gains.md``. ``tokens`` is per rank:
under TP every rank holds the same ``tokens``, under DP+EP each rank brings its own ``tokens`` (so the EP
group routes ``world × tokens``). Timed per layer call (CUDA events; CPU: perf_counter); a step's time is the
slowest rank's. Graph mode captures one layer call (TP, and EP with the padded dispatch; the exact dispatch
syncs the host and is eager only). One weight set per preset and variant (no rotation: a rank's shard of
the big presets is far over L2; for the small ones the weights may partly sit in L2, unlike the single-GPU
sweep). CPU: tiny shapes (``MoEConfig.scaled_down``), eager only.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from kernels_real.bench import _nvidia_smi, _write_json
from kernels_real.config import ConfigError, MoEConfig, get_preset
from kernels_real.distributed.ep_layer import EPMoELayer, random_ep_weights
from kernels_real.distributed.parallel import Dist, init, shutdown
from kernels_real.distributed.timing import agreed_max, gather, measure, rank_summary
from kernels_real.distributed.tp_layer import TPMoELayer, random_tp_weights
from kernels_real.layer import MoEWeights
from kernels_real.streams import current_stream, platform_info, reset_current_stream
from simulator.outputs import write_text_atomic

PARALLEL = ("tp", "dp_ep")
DEFAULT_PRESETS = ("deepseek_v3", "qwen2_57b_a14b", "deepseek_v2_lite")
DEFAULT_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUICK_TOKENS = (1, 16)
STRATEGIES = ("sequential", "multi_stream")
MODES = ("eager", "graph")


class BenchInputError(ValueError):
    """Bad command-line input."""


def layer_record(preset: str, parallel: str, world: int, tokens: int, strategy: str, mode: str,
                 dispatch: str | None, rank_samples: list[list[float]], backend: str, comm_backend: str,
                 device: str) -> dict[str, object]:
    """One ``cases.json`` record from every rank's per-call samples (µs)."""
    return {"preset": preset, "parallel": parallel, "world": world, "tokens": tokens, "strategy": strategy,
            "mode": mode, "dispatch": dispatch, **rank_summary(rank_samples), "weight_sets": 1,
            "layers_per_replay": 1, "backend": backend, "comm_backend": comm_backend, "device": device,
            "timer": "cuda_events" if device == "cuda" else "perf_counter", "order": "one strategy at a time",
            "trace": None}


def gains_markdown(cases: list[dict[str, object]], env: dict[str, object]) -> str:
    """Markdown table of multi_stream's gain over sequential per preset, parallelism, mode and tokens."""
    idx = {(c["preset"], f"{c['parallel']}/{c['dispatch']}" if c["dispatch"] else c["parallel"], c["mode"],
            c["tokens"], c["strategy"]): c["median_us"] for c in cases}
    lines = [
        "# Measured multi_stream gains vs sequential, multi-GPU",
        "",
        f"Source: `kernels_real.distributed.bench_layers` on {env.get('world')} × "
        f"{env.get('device_name', env.get('backend'))}, {env.get('comm_backend')}, {env.get('date')} "
        f"(torch {env.get('torch')}); slowest rank's median layer time (µs); tokens per rank; "
        "gain % = (sequential − multi_stream) / sequential × 100, positive = faster.",
        "",
        "| preset | parallel[/dispatch] | mode | tokens | sequential µs | multi_stream µs | gain % |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    keys = sorted({k[:4] for k in idx}, key=lambda k: (str(k[0]), str(k[1]), str(k[2]), int(k[3])))
    for key in keys:
        seq, ms = idx.get((*key, "sequential")), idx.get((*key, "multi_stream"))
        gain = f"{(seq - ms) / seq * 100:+.1f}" if seq and ms else "—"
        cells = [str(v) for v in key] + [f"{seq:.1f}" if seq else "—", f"{ms:.1f}" if ms else "—", gain]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _layer(cfg: MoEConfig, parallel: str, d: Dist, tokens: int, dispatch: str) -> TPMoELayer | EPMoELayer:
    if parallel == "tp":
        return TPMoELayer(cfg, d)
    return EPMoELayer(cfg, d, max_tokens=tokens, dispatch=dispatch)


def _step(layer: TPMoELayer | EPMoELayer, w: MoEWeights, x: torch.Tensor, strategy: str, mode: str
          ) -> Callable[[int], None]:
    if mode == "eager":
        return lambda i: layer(x, w, strategy)
    for _ in range(3):  # warm-up outside the capture (allocator, NCCL communicators, cuBLAS handles)
        layer(x, w, strategy)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(x, w, strategy)
    return lambda i: graph.replay()


class Sweep:
    def __init__(self, args: argparse.Namespace, d: Dist) -> None:
        self.args, self.d = args, d
        self.cases: list[dict[str, object]] = []
        self.skipped: list[str] = []
        self.deadline = time.monotonic() + args.budget_s

    def run_preset(self, cfg: MoEConfig, parallel: str) -> None:
        d, args = self.d, self.args
        try:
            w = (random_tp_weights if parallel == "tp" else random_ep_weights)(cfg, d, seed=100)
        except ConfigError as exc:
            self.skipped.append(f"{cfg.name} {parallel}: {exc}")
            return
        dispatch = None if parallel == "tp" else args.dispatch
        for t in args.tokens:
            seed = 7 + t if parallel == "tp" else 7 + t + 1000 * d.rank  # EP: each rank its own tokens
            x = torch.randn(t, cfg.hidden, generator=torch.Generator().manual_seed(seed))
            x = x.to(device=d.device, dtype=getattr(torch, cfg.dtype))
            for strategy in args.strategies:
                if cfg.applicable(strategy):
                    continue
                for mode in args.modes:
                    label = f"{cfg.name} {parallel} tokens={t} {strategy} {mode}"
                    if mode == "graph" and (not d.on_gpu or dispatch == "exact"):
                        continue
                    if agreed_max(d, float(time.monotonic() > self.deadline)):  # any rank's clock: all agree
                        self.skipped.append(f"{label}: --budget-s {args.budget_s} s ran out")
                        continue
                    layer = _layer(cfg, parallel, d, t, dispatch or "padded")
                    step = _step(layer, w, x, strategy, mode)
                    samples = measure(d, step, 0.02 if args.quick else 0.1, 5 if args.quick else 10,
                                      50 if args.quick else 300)
                    ranks = gather(d, samples)
                    if ranks is not None:
                        self.cases.append(layer_record(cfg.name, parallel, d.world, t, strategy, mode, dispatch,
                                                       ranks, layer.backend, d.backend, d.device.type))
                    del step, layer
        del w
        gc.collect()
        if d.on_gpu:
            torch.cuda.empty_cache()

    def write(self, env: dict[str, object]) -> None:
        if self.d.rank != 0:
            return
        out: Path = self.args.out
        _write_json(out / "cases.json", self.cases)
        _write_json(out / "env.json", env | {"skipped": self.skipped})
        write_text_atomic(out / "gains.md", gains_markdown(self.cases, env))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m kernels_real.distributed.bench_layers",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory (rank 0 writes)")
    p.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS), help="presets (default: %(default)s)")
    p.add_argument("--tokens", nargs="+", type=int, help="tokens per rank (default 1 2 .. 256; --quick: 1 16)")
    p.add_argument("--parallel", nargs="+", default=list(PARALLEL), help="tp and/or dp_ep (default: both)")
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), help="default: sequential multi_stream")
    p.add_argument("--modes", nargs="+", default=list(MODES), help="eager and/or graph (default: both)")
    p.add_argument("--dispatch", choices=("padded", "exact"), default="padded",
                   help="DP+EP dispatch: padded (fixed capacity, graph capturable) or exact (host sync, eager)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if visible (NCCL), else cpu (gloo)")
    p.add_argument("--quick", action="store_true", help="few tokens, short timing: a smoke run")
    p.add_argument("--budget-s", type=float, default=420.0, help="skip remaining cases after this many s")
    return p.parse_args(argv)


def _validate(args: argparse.Namespace) -> None:
    for name, given, known in (("parallel", args.parallel, PARALLEL), ("strategy", args.strategies, STRATEGIES),
                               ("mode", args.modes, MODES)):
        for v in given:
            if v not in known:
                raise BenchInputError(f"unknown {name} {v!r}; known: {', '.join(known)}")
    args.tokens = args.tokens or list(QUICK_TOKENS if args.quick else DEFAULT_TOKENS)
    if any(t < 1 for t in args.tokens):
        raise BenchInputError("token counts must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise BenchInputError("no CUDA/ROCm device visible to torch; use --device cpu for the tiny CPU run")
    for name in args.presets:
        get_preset(name)


def run(args: argparse.Namespace) -> int:
    """Time every case, rank 0 writes the outputs and prints the gain table."""
    d = init(args.device)
    configs = [get_preset(n) for n in args.presets]
    if not d.on_gpu:
        configs = [dataclasses.replace(c.scaled_down(), dtype="float32") for c in configs]
    sweep = Sweep(args, d)
    env: dict[str, object] = {"date": dt.datetime.now().isoformat(timespec="seconds"), "argv": sys.argv[1:],
                              **platform_info(d.device if d.on_gpu else None), "world": d.world,
                              "comm_backend": d.backend, "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
                              "nccl_version": ".".join(map(str, torch.cuda.nccl.version())) if d.on_gpu else None,
                              "timing": "per layer call, CUDA events (CPU: perf_counter), warm-up first, the same "
                                        "call count on every rank; slowest rank's statistics",
                              "rocm_note": "ROCm was not run; only APIs HIP torch provides are used"}
    if d.on_gpu and d.rank == 0 and not torch.version.hip:
        env["nvidia_smi_before"] = _nvidia_smi()
    started = time.monotonic()
    try:
        if d.on_gpu:
            current_stream(safe=True)  # a dedicated stream, as vLLM runs
        for cfg in configs:
            for parallel in args.parallel:
                sweep.run_preset(cfg, parallel)
                if d.rank == 0:
                    print(f"[bench_layers] {cfg.name} {parallel}: {time.monotonic() - started:.1f} s, "
                          f"{len(sweep.cases)} cases", file=sys.stderr, flush=True)
                sweep.write(env)
    finally:
        if d.on_gpu:
            reset_current_stream()
        shutdown()
    env["elapsed_s"] = round(time.monotonic() - started, 1)
    sweep.write(env)
    if d.rank == 0:
        print(gains_markdown(sweep.cases, env))
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry: bad input gives one line on stderr and exit code 2."""
    args = _parse(argv)
    try:
        _validate(args)
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args)
    except (BenchInputError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
