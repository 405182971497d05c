"""Does profiling change what CUDA-graph replays of the layer take, and do the trace's kernel spans agree with
CUDA-event timings of the same replays?

``python -m kernels_real.graph_probe --out DIR [--presets ...] [--tokens ...] [--replays N]`` writes
``DIR/graph_probe.json``, ``DIR/traces/*.json.gz`` and prints a table. GPU only (CUDA; the calls are
HIP-portable, ROCm was not run).

Per token count × strategy (sequential, multi_stream) of each preset one graph of all weight sets is captured
(as ``bench`` does), then three phases run over all cases of the preset (so that a profiler session cannot
slow the timings taken before it; run one preset per process to keep presets apart too):
``plain`` — ``N`` back-to-back replays timed with CUDA events; ``profiled`` — the same inside a
``torch.profiler`` session configured as ``bench`` traces (CPU + CUDA activities, record_shapes, cuda_sync
records), the trace kept; ``after`` — plain timing again. From each trace: the GPU span of each replay
(first kernel start to last kernel end) and the sum of its kernel durations, per layer.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from kernels_real.bench import _nvidia_smi, _trace, _weight_sets, graph_step
from kernels_real.config import ConfigError, get_preset
from kernels_real.layer import MoELayer, MoEWeights
from kernels_real.streams import current_stream, platform_info, reset_current_stream
from kernels_real.timing import time_steps

STRATEGIES = ("sequential", "multi_stream")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _median_per_layer(samples: list[float], layers: int) -> float:
    return statistics.median(samples) / layers


def replay_spans(path: Path, replays: int) -> tuple[list[float], list[float]]:
    """Per replay, from a trace of ``replays`` back-to-back replays: the GPU span and the sum of GPU op
    durations (the ops split into ``replays`` equal runs in start order)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS), key=lambda e: e["ts"])
    per = len(ops) // replays
    spans, busy = [], []
    for k in range(replays):
        run = ops[k * per:(k + 1) * per]
        spans.append(max(e["ts"] + e["dur"] for e in run) - run[0]["ts"])
        busy.append(sum(e["dur"] for e in run))
    return spans, busy


def probe(name: str, tokens: list[int], replays: int, out: Path) -> list[dict[str, object]]:
    """The three phases over every case of one preset; one record per case."""
    device = torch.device("cuda")
    cfg = get_preset(name)
    layer = MoELayer(cfg, device)
    weights = [MoEWeights.random(cfg, device, seed=100 + k) for k in range(_weight_sets(cfg, True, None))]
    cases: dict[tuple[str, int, str], tuple[Callable[[int], None], int]] = {}
    for t in tokens:
        x = torch.randn(t, cfg.hidden, generator=torch.Generator(device=device).manual_seed(7 + t),
                        device=device, dtype=layer.dtype)
        for strategy in STRATEGIES:
            cases[(name, t, strategy)] = graph_step(layer, weights, x, strategy), len(weights)
    records = {key: {"preset": key[0], "tokens": key[1], "strategy": key[2], "layers_per_replay": n}
               for key, (_, n) in cases.items()}
    for phase in ("plain", "profiled", "after"):
        for key, (step, layers) in cases.items():
            for i in range(3):
                step(i)
            record = records[key]
            if phase != "profiled":
                samples = time_steps(step, replays, True)
                record[f"{phase}_median_us"] = _median_per_layer(samples, layers)
                record[f"{phase}_first5_median_us"] = _median_per_layer(samples[:5], layers)
                continue
            timed: list[float] = []
            path = out / "traces" / f"{key[0]}_t{key[1]}_{key[2]}_graph_probe.json.gz"
            meta = {"preset": key[0], "tokens": key[1], "strategy": key[2], "mode": "graph",
                    "layers_per_replay": layers, "graph_replays_per_trace": replays,
                    "layers_per_trace": layers * replays,
                    "note": f"graph_probe: {replays} back-to-back replays timed with CUDA events while profiled"}
            _trace(lambda step=step, timed=timed: timed.extend(time_steps(step, replays, True)), path, meta, True)
            spans, busy = replay_spans(path, replays)
            record |= {"profiled_median_us": _median_per_layer(timed, layers),
                       "trace_span_median_us": _median_per_layer(spans, layers),
                       "trace_busy_median_us": _median_per_layer(busy, layers),
                       "trace": str(path.relative_to(out))}
    del cases, weights, layer
    torch.cuda.empty_cache()
    return list(records.values())


def _table(records: list[dict[str, object]]) -> str:
    lines = ["µs per layer (medians) | plain | profiled (events) | trace span | trace busy | after | plain first 5"]
    for r in records:
        lines.append(f"{r['preset']:>16} t{r['tokens']:<5} {r['strategy']:<12} | {r['plain_median_us']:9.1f} | "
                     f"{r['profiled_median_us']:9.1f} | {r['trace_span_median_us']:9.1f} | "
                     f"{r['trace_busy_median_us']:9.1f} | {r['after_median_us']:9.1f} | "
                     f"{r['plain_first5_median_us']:9.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.graph_probe", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=["deepseek_v3", "qwen2_57b_a14b", "deepseek_v2_lite"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 16, 128])
    p.add_argument("--replays", type=int, default=40, help="replays per timing and per trace")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: the graph probe needs a CUDA/ROCm device", file=sys.stderr)
        return 2
    if args.replays < 5:
        print("error: --replays must be at least 5", file=sys.stderr)
        return 2
    try:
        for name in args.presets:
            get_preset(name)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    env = {"date": dt.datetime.now().isoformat(timespec="seconds"), "argv": sys.argv[1:], **platform_info(device),
           "nvidia_smi_before": _nvidia_smi(), "how": __doc__,
           "rocm_note": "ROCm was not run here; the code uses only APIs HIP torch provides"}
    (args.out / "traces").mkdir(parents=True, exist_ok=True)
    current_stream(safe=True)  # a dedicated current stream, as the bench and vLLM
    try:
        records = [r for name in args.presets for r in probe(name, args.tokens, args.replays, args.out)]
    finally:
        reset_current_stream()
    env["nvidia_smi_after"] = _nvidia_smi()
    (args.out / "graph_probe.json").write_text(json.dumps({"env": env, "cases": records}, indent=1))
    print(_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
