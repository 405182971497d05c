"""What a replayed graph of the layer costs per replay and per layer: graphs of N layer calls, N varied.

``python -m kernels_real.replay_length_probe --out DIR [--presets ...] [--tokens ...] [--repeats K ...]``
captures, per preset × token count × strategy (sequential, multi_stream), graphs of N = k × W layer calls for
each k of ``--repeats`` (W: the preset's weight sets, by memory as ``bench`` chooses them; call i runs weight
set i mod W, so every graph streams the same weights in the same rotation). All graphs of a point are timed
in interleaved rounds (CUDA events around each replay, back to back, after warm-up replays; medians per
graph). Per strategy a line through the medians, µs per replay = ``intercept_us`` + N × ``per_layer_us``,
separates what a replay pays once (its start, and for multi_stream its executor's first fork: the layer
traces show the first layer of each multi-stream replay overlapping far less than the others) from what each
further layer costs (the steady state of a whole-model graph). Writes ``DIR/replay_lengths.json`` (records
and the run's environment) and prints a table. GPU only (CUDA; the torch.cuda calls are HIP-portable, ROCm was
not run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernels_real.bench import _weight_sets, _write_json, bench_input, graph_step, run_env, weight_seed
from kernels_real.config import get_preset, preset_error
from kernels_real.layer import MoELayer, MoEWeights
from kernels_real.streams import current_stream, reset_current_stream
from kernels_real.timing import time_steps

STRATEGIES = ("sequential", "multi_stream")
WARM_REPLAYS = 3
REPLAYS_PER_ROUND = 4


def line_fit(lengths: list[int], medians_us: list[float]) -> dict[str, float]:
    """µs per replay against layers per replay: intercept (once per replay), slope (per layer) and the largest
    |residual| (µs)."""
    if len(set(lengths)) < 2:
        raise ValueError("a line needs at least two replay lengths")
    slope, intercept = np.polyfit(np.array(lengths, float), np.array(medians_us, float), 1)
    residual = max(abs(m - (intercept + slope * n)) for n, m in zip(lengths, medians_us, strict=True))
    return {"intercept_us": float(intercept), "per_layer_us": float(slope), "max_residual_us": float(residual)}


def probe_point(layer: MoELayer, weights: list[MoEWeights], tokens: int, repeats: list[int],
                rounds: int) -> list[dict[str, Any]]:
    """Both strategies' graphs of every length at one token count, timed interleaved; one record per strategy."""
    x = bench_input(layer.cfg, tokens, torch.device("cuda"), layer.dtype)
    lengths = [k * len(weights) for k in repeats]
    graphs = {(s, n): graph_step(layer, weights, x, s, n) for s in STRATEGIES for n in lengths}
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in graphs}
    for _ in range(rounds):
        for key, step in graphs.items():
            for i in range(WARM_REPLAYS):
                step(i)
            samples[key] += time_steps(step, REPLAYS_PER_ROUND, True)
    records = []
    for strategy in STRATEGIES:
        medians = [statistics.median(samples[(strategy, n)]) for n in lengths]
        records.append({
            "preset": layer.cfg.name, "tokens": tokens, "strategy": strategy, "mode": "graph",
            "weight_sets": len(weights), "backend": layer.backend, "layers_per_replay": lengths,
            "median_us_per_replay": medians, "replays": rounds * REPLAYS_PER_ROUND,
            **line_fit(lengths, medians)})
    del graphs
    return records


def probe_preset(name: str, tokens: list[int], repeats: list[int], rounds: int) -> list[dict[str, Any]]:
    device = torch.device("cuda")
    cfg = get_preset(name)
    layer = MoELayer(cfg, device)
    weights = [MoEWeights.random(cfg, device, seed=weight_seed(k)) for k in range(_weight_sets(cfg, True, None))]
    records = [r for t in tokens for r in probe_point(layer, weights, t, repeats, rounds)]
    del weights, layer
    torch.cuda.empty_cache()
    return records


def table(records: list[dict[str, Any]]) -> str:
    """Per point: each strategy's per-replay intercept and per-layer slope, the multi_stream intercept's excess,
    and the gain per layer at the shortest replay against the steady (slope) gain."""
    lines = ["preset            tokens | seq µs/layer | ms µs/layer | seq once | ms once | ms once - seq once | "
             "gain at N=W | steady gain"]
    by_point: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in records:
        by_point.setdefault((r["preset"], r["tokens"]), {})[r["strategy"]] = r
    for (preset, tokens), pair in by_point.items():
        seq, ms = pair["sequential"], pair["multi_stream"]
        first = 1 - ms["median_us_per_replay"][0] / seq["median_us_per_replay"][0]
        steady = 1 - ms["per_layer_us"] / seq["per_layer_us"]
        lines.append(f"{preset:<18}{tokens:>6} | {seq['per_layer_us']:12.1f} | {ms['per_layer_us']:11.1f} | "
                     f"{seq['intercept_us']:8.1f} | {ms['intercept_us']:7.1f} | "
                     f"{ms['intercept_us'] - seq['intercept_us']:18.1f} | {100 * first:+10.1f}% | "
                     f"{100 * steady:+10.1f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.replay_length_probe",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=["deepseek_v3@tp8", "qwen2_57b_a14b", "deepseek_v2_lite"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--repeats", nargs="+", type=int, default=[1, 2, 4],
                   help="replay lengths in weight-set rotations: N = k × W layer calls (default 1 2 4)")
    p.add_argument("--rounds", type=int, default=12, help="interleaved timing rounds per point (default 12)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no further preset after this many seconds (the records so far are written)")
    args = p.parse_args(argv)
    problem = (preset_error(args.presets)
               or ("--repeats needs at least two distinct positive values"
                   if len({k for k in args.repeats if k > 0}) < 2 or min(args.repeats) < 1 else None)
               or ("--rounds must be at least 3" if args.rounds < 3 else None)
               or ("--tokens must be positive" if min(args.tokens) < 1 else None)
               or (None if torch.cuda.is_available() else "the replay length probe needs a CUDA/ROCm device"))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    env = run_env(torch.device("cuda"), __doc__)
    args.out.mkdir(parents=True, exist_ok=True)
    current_stream(safe=True)  # a dedicated current stream, as the bench and vLLM
    records: list[dict[str, Any]] = []
    start = time.monotonic()
    try:
        for name in args.presets:
            if args.budget_s is not None and time.monotonic() - start > args.budget_s:
                print(f"budget spent: {name} and the presets after it skipped", file=sys.stderr)
                break
            records += probe_preset(name, args.tokens, sorted(set(args.repeats)), args.rounds)
            print(f"{name}: done at {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        reset_current_stream()
        _write_json(args.out / "replay_lengths.json", {"env": env, "records": records})
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
