"""Where the eager multi-stream layer's extra time goes: variants of the fork/join, and host costs per op on
one stream vs two.

``python -m kernels_real.eager_probe --out DIR [--presets ...] [--tokens ...]`` writes ``DIR/eager_probe.json``
and prints a table. GPU only (CUDA; the calls are HIP-portable, ROCm was not run).

Part A, layer variants, timed interleaved (rounds of short bursts, one shuffled order, GC off, as
``bench --interleave-eager``); per call both the GPU time (CUDA events on the current stream around the call)
and the host time (``perf_counter`` around the call, no sync inside a burst):
``sequential``, ``multi_stream`` (the layer's vLLM event pair), ``ms_no_events`` (shared experts on the aux
stream, no record/wait: racy, for timing only), ``ms_same_stream`` (the event pair and stream switch, but the
"aux" stream is the current stream itself).

Part B, host µs per call with the GPU kept busy (a sleep kernel queued first, so no call waits for the device):
an op issued twice on the current stream, vs once there and once inside ``torch.cuda.stream(aux)``, vs once
there and once inside ``torch.cuda.stream(current)``; for the shared expert's gate_up GEMM at each token count
and for SiLU.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from kernels_real.bench import _weight_sets, bench_input, run_env, weight_seed
from kernels_real.config import ConfigError, get_preset
from kernels_real.layer import MoELayer, MoEWeights
from kernels_real.streams import current_stream, reset_current_stream

VARIANTS = ("sequential", "multi_stream", "ms_no_events", "ms_same_stream")
ROUNDS = 20
BURST = 5
SEED = 20261202
BUSY_CYCLES = 40_000_000  # ~20 ms of torch.cuda._sleep: the host never waits for the device while timed
HOST_CALLS = 100


def _fork_join(layer: MoELayer, aux: torch.cuda.Stream | None, events: bool) -> Callable[..., torch.Tensor]:
    """The layer's multi_stream body with the aux stream replaced (``None``: the current stream) and the event
    pair optional."""
    def call(x: torch.Tensor, w: MoEWeights) -> torch.Tensor:
        main = torch.cuda.current_stream()
        side = aux or main
        pair = layer.events[0]
        if events:
            pair.input_ready.record(main)
        with torch.cuda.stream(side):
            if events:
                side.wait_event(pair.input_ready)
            shared = layer._shared(x, w)
            if events:
                pair.output_ready.record(side)
        routed = layer._routed(x, w)
        if events:
            main.wait_event(pair.output_ready)
        return routed + shared
    return call


def _variant_step(layer: MoELayer, variant: str) -> Callable[[torch.Tensor, MoEWeights], torch.Tensor]:
    if variant in ("sequential", "multi_stream"):
        return lambda x, w: layer(x, w, variant)
    if variant == "ms_no_events":
        return _fork_join(layer, layer.aux, events=False)
    return _fork_join(layer, None, events=True)


def _timed_burst(step: Callable[[int], None], n: int) -> tuple[list[float], list[float]]:
    """GPU µs (events) and host µs (perf_counter) of ``n`` back-to-back calls."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    host = []
    for i in range(n):
        starts[i].record()
        t0 = time.perf_counter()
        step(i)
        host.append((time.perf_counter() - t0) * 1e6)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True)], host


def layer_variants(preset: str, tokens: list[int], device: torch.device) -> list[dict[str, object]]:
    """Part A for one preset: every token count × variant, interleaved."""
    cfg = get_preset(preset)
    layer = MoELayer(cfg, device)
    sets = _weight_sets(cfg, True, None)
    weights = [MoEWeights.random(cfg, device, seed=weight_seed(k)) for k in range(sets)]
    steps: dict[tuple[int, str], Callable[[int], None]] = {}
    for t in tokens:
        x = bench_input(cfg, t, device, layer.dtype)
        for variant in VARIANTS:
            body = _variant_step(layer, variant)
            steps[(t, variant)] = lambda i, body=body, x=x, ws=weights: body(x, ws[i % sets])
    for step in steps.values():
        for i in range(3):
            step(i)
    torch.cuda.synchronize()
    order = list(steps)
    random.Random(SEED).shuffle(order)
    gpu: dict[tuple[int, str], list[float]] = {k: [] for k in steps}
    host: dict[tuple[int, str], list[float]] = {k: [] for k in steps}
    gc.disable()
    try:
        for _ in range(ROUNDS):
            for key in order:
                g, h = _timed_burst(steps[key], BURST)
                gpu[key] += g
                host[key] += h
    finally:
        gc.enable()
    out = [{"preset": preset, "tokens": t, "variant": v, "gpu_median_us": statistics.median(gpu[(t, v)]),
            "host_median_us": statistics.median(host[(t, v)]), "calls": len(gpu[(t, v)]), "weight_sets": sets}
           for (t, v) in sorted(steps)]
    del weights, layer
    gc.collect()
    torch.cuda.empty_cache()
    return out


def _host_us(fn: Callable[[], object]) -> float:
    """Median over 5 batches of host µs per ``fn()`` while a sleep kernel keeps the device busy."""
    per = []
    for _ in range(6):
        torch.cuda._sleep(BUSY_CYCLES)
        t0 = time.perf_counter()
        for _ in range(HOST_CALLS):
            fn()
        per.append((time.perf_counter() - t0) / HOST_CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per[1:])


def host_per_op(preset: str, tokens: list[int], device: torch.device) -> list[dict[str, object]]:
    """Part B: host µs per pair of calls, both on the current stream vs one on aux vs one in a no-op switch."""
    cfg = get_preset(preset)
    dtype = getattr(torch, cfg.dtype)
    aux = torch.cuda.Stream(device)
    w13 = torch.randn(2 * cfg.shared_total, cfg.hidden, device=device, dtype=dtype) * cfg.hidden ** -0.5
    out = []
    for t in tokens:
        x = torch.randn(t, cfg.hidden, device=device, dtype=dtype)
        act = torch.randn(t, cfg.shared_total, device=device, dtype=dtype)
        for op, fn in (("gate_up_gemm", lambda x=x: F.linear(x, w13)), ("silu", lambda act=act: F.silu(act))):
            def same(fn: Callable[[], object] = fn) -> None:
                fn()
                fn()

            def other(fn: Callable[[], object] = fn) -> None:
                fn()
                with torch.cuda.stream(aux):
                    fn()

            def switch(fn: Callable[[], object] = fn) -> None:
                fn()
                with torch.cuda.stream(torch.cuda.current_stream()):
                    fn()
            for f in (same, other, switch):
                f()
            out.append({"preset": preset, "tokens": t, "op": op, "both_current_us": _host_us(same),
                        "second_on_aux_us": _host_us(other), "second_in_noop_switch_us": _host_us(switch)})
    return out


def _table(variants: list[dict[str, object]], host: list[dict[str, object]]) -> str:
    lines = ["| preset | tokens | variant | GPU median µs | host median µs | vs sequential (GPU) |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    seq = {(r["preset"], r["tokens"]): r["gpu_median_us"] for r in variants if r["variant"] == "sequential"}
    for r in variants:
        base = seq[(r["preset"], r["tokens"])]
        lines.append(f"| {r['preset']} | {r['tokens']} | {r['variant']} | {r['gpu_median_us']:.1f} | "
                     f"{r['host_median_us']:.1f} | {(base - r['gpu_median_us']) / base:+.1%} |")
    lines += ["", "| preset | tokens | op | 2× current µs | 2nd on aux µs | 2nd in no-op switch µs |",
              "| --- | ---: | --- | ---: | ---: | ---: |"]
    lines += [f"| {r['preset']} | {r['tokens']} | {r['op']} | {r['both_current_us']:.1f} | "
              f"{r['second_on_aux_us']:.1f} | {r['second_in_noop_switch_us']:.1f} |" for r in host]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.eager_probe", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=["deepseek_v3", "qwen2_57b_a14b", "deepseek_v2_lite"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 2, 16])
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: the eager probe needs a CUDA/ROCm device", file=sys.stderr)
        return 2
    try:
        for name in args.presets:
            if not get_preset(name).has_shared:
                raise ConfigError(f"{name} has no shared expert: nothing to fork")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    env = run_env(device, __doc__)
    current_stream(safe=True)  # a dedicated current stream, as the bench and vLLM
    try:
        variants = [r for name in args.presets for r in layer_variants(name, args.tokens, device)]
        host = [r for name in args.presets for r in host_per_op(name, args.tokens, device)]
    finally:
        reset_current_stream()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eager_probe.json").write_text(json.dumps({"env": env, "variants": variants, "host_per_op": host},
                                                          indent=1))
    print(_table(variants, host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
