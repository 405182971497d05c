"""Does profiling change what CUDA-graph replays of the layer take, and do the trace's kernel spans agree with
CUDA-event timings of the same replays?

``python -m kernels_real.graph_probe --out DIR [--presets ...] [--tokens ...] [--replays N]`` writes, in the
bench's layout, ``DIR/cases.json`` (graph records: ``median_us`` = the plain replays' median per layer, plus
the figures below), ``DIR/env.json``, ``DIR/traces/*.json.gz`` (per case a graph trace of ``N`` replays and an
eager trace of one warmed layer call per weight set, back to back), and prints a table. GPU only
(CUDA; the calls are HIP-portable, ROCm was not run).

Per token count × strategy (sequential, multi_stream) of a preset one graph of all weight sets is captured (as
``bench`` does), then phases run over all cases of the preset, so that a profiler session cannot slow the
timings taken before it: ``plain`` — ``N`` back-to-back replays timed with CUDA events; ``profiled`` — the
same inside a ``torch.profiler`` session configured as ``bench`` traces (CPU + CUDA activities,
record_shapes, cuda_sync records), the trace kept; ``after`` — plain timing again; ``eager`` — the eager
trace. From each graph trace: the GPU span of each replay (first op start to last op end) and the sum of its
GPU op durations, per layer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

import torch

from kernels_real.bench import (
    GraphStep,
    _nvidia_smi,
    _trace,
    _weight_sets,
    _write_json,
    bench_input,
    graph_step,
    run_env,
    weight_seed,
)
from kernels_real.config import get_preset, preset_error
from kernels_real.layer import MoELayer, MoEWeights
from kernels_real.streams import current_stream, reset_current_stream
from kernels_real.timing import time_steps

STRATEGIES = ("sequential", "multi_stream")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


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


class Case:
    """One token count × strategy of a preset: its graph step and its record."""

    def __init__(self, layer: MoELayer, weights: list[MoEWeights], x: torch.Tensor, strategy: str) -> None:
        self.layer, self.weights, self.x, self.strategy = layer, weights, x, strategy
        self.step: GraphStep = graph_step(layer, weights, x, strategy)
        self.record: dict[str, object] = {
            "preset": layer.cfg.name, "tokens": x.shape[0], "strategy": strategy, "mode": "graph",
            "weight_sets": len(weights), "layers_per_replay": len(weights), "backend": layer.backend,
            "device": "cuda", "timer": "cuda_events", "order": "graph_probe: one case at a time per phase"}

    def name(self, mode: str) -> str:
        return f"{self.record['preset']}_t{self.record['tokens']}_{self.strategy}_{mode}.json.gz"

    def meta(self, mode: str) -> dict[str, object]:
        return {key: self.record[key] for key in ("preset", "tokens", "strategy", "weight_sets", "backend")} | {
            "mode": mode, "median_us": self.record["median_us"]}

    def warm(self) -> None:
        for i in range(3):
            self.step(i)

    def plain(self, replays: int) -> list[float]:
        self.warm()
        return [t / len(self.weights) for t in time_steps(self.step, replays, True)]

    def profiled(self, replays: int, out: Path) -> None:
        self.warm()
        timed: list[float] = []
        layers = len(self.weights)
        path = out / "traces" / self.name("graph")
        meta = self.meta("graph") | {
            "layers_per_replay": layers, "graph_replays_per_trace": replays, "layers_per_trace": layers * replays,
            "note": f"graph_probe: {replays} back-to-back replays of {layers} layer calls, timed with CUDA events "
                    "while profiled"}
        _trace(lambda: timed.extend(time_steps(self.step, replays, True)), path, meta, True)
        spans, busy = replay_spans(path, replays)
        self.record |= {"profiled_median_us": statistics.median(timed) / layers,
                        "trace_span_median_us": statistics.median(spans) / layers,
                        "trace_busy_median_us": statistics.median(busy) / layers,
                        "trace": f"traces/{self.name('graph')}"}

    def eager_trace(self, out: Path) -> None:
        """One warmed eager layer call per weight set, back to back (the graph runs each set once)."""
        sets = len(self.weights)

        def calls() -> None:
            for i in range(sets):
                self.layer(self.x, self.weights[i], self.strategy)
        calls()
        meta = self.meta("eager") | {
            "layers_per_replay": 1, "layers_per_trace": sets,
            "note": f"graph_probe: {sets} warmed eager layer calls back to back (one per weight set, as in the "
                    "graph), one device sync before and after; median_us is the graph replays' (no eager timing)"}
        _trace(calls, out / "traces" / self.name("eager"), meta, True)


def probe(name: str, tokens: list[int], replays: int, out: Path) -> list[dict[str, object]]:
    """The phases over every case of one preset; one record per case."""
    device = torch.device("cuda")
    cfg = get_preset(name)
    layer = MoELayer(cfg, device)
    weights = [MoEWeights.random(cfg, device, seed=weight_seed(k)) for k in range(_weight_sets(cfg, True, None))]
    cases = []
    for t in tokens:
        x = bench_input(cfg, t, device, layer.dtype)
        cases += [Case(layer, weights, x, strategy) for strategy in STRATEGIES]
    for case in cases:
        samples = case.plain(replays)
        case.record |= {"median_us": statistics.median(samples), "first5_median_us": statistics.median(samples[:5]),
                        "replays": replays}
    for case in cases:
        case.profiled(replays, out)
    for case in cases:
        case.record["after_median_us"] = statistics.median(case.plain(replays))
    for case in cases:
        case.eager_trace(out)
    records = [case.record for case in cases]
    del cases, weights, layer
    torch.cuda.empty_cache()
    return records


def _table(records: list[dict[str, object]]) -> str:
    lines = ["µs per layer (medians) | plain | profiled (events) | trace span | trace busy | after | plain first 5"]
    for r in records:
        lines.append(f"{r['preset']:>16} t{r['tokens']:<5} {r['strategy']:<12} | {r['median_us']:9.1f} | "
                     f"{r['profiled_median_us']:9.1f} | {r['trace_span_median_us']:9.1f} | "
                     f"{r['trace_busy_median_us']:9.1f} | {r['after_median_us']:9.1f} | "
                     f"{r['first5_median_us']:9.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.graph_probe", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=["deepseek_v3", "qwen2_57b_a14b", "deepseek_v2_lite"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 16, 128, 1024])
    p.add_argument("--replays", type=int, default=40, help="replays per timing and per graph trace")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: the graph probe needs a CUDA/ROCm device", file=sys.stderr)
        return 2
    if args.replays < 5:
        print("error: --replays must be at least 5", file=sys.stderr)
        return 2
    error = preset_error(args.presets)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    env = run_env(device, __doc__)
    (args.out / "traces").mkdir(parents=True, exist_ok=True)
    current_stream(safe=True)  # a dedicated current stream, as the bench and vLLM
    try:
        records = [r for name in args.presets for r in probe(name, args.tokens, args.replays, args.out)]
    finally:
        reset_current_stream()
    _write_json(args.out / "cases.json", records)
    _write_json(args.out / "env.json", env | {"nvidia_smi_after": _nvidia_smi()})
    print(_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
