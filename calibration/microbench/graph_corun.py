"""Decode-regime co-runs inside CUDA graphs: what a dual-stream MoE layer overlaps at 1-64 tokens.

Per preset, rank shard (``@tpN``) and token count M, the layer's pieces are captured as graphs, each over W
rotating weight sets (so L2 never holds a set's weights from one use to the next; times are per set):
``S`` the shared-expert chain (gate_up GEMM, SiLU-and-mul, down GEMM, Qwen2's gate), ``R`` the routing chain
(fp32 router GEMM, softmax/sigmoid + top-k, sort, scatter/cumsum, gather), ``G`` the routed experts (grouped
GEMMs, SiLU-and-mul, weighted index_add) on routing results computed once beforehand, ``RG`` = R then G.
Pairs fork from the main stream with an event pair, as vLLM does, and join back: ``S|X`` with the aux
branch (S) captured first (the multi-stream layer's order), ``X|S`` with the main work captured first, and
staggered ``S|RG`` pairs where one branch first runs a ~3 µs sleep kernel (``sleep`` is timed alone too).
``RG+fj0`` / ``RG+fj1`` are RG with an empty fork/join (aux only waits and records) or with one tiny kernel
on aux: the cost of a cross-stream fork/join inside a replayed graph as its own quantity.

Timing: CUDA events around each graph replay after warm-up replays, medians. Then one profiler session per
configuration replays every graph once more: each kernel's start and duration in the replay, its stream,
grid, block, registers per thread, shared memory, blocks per SM and warps per SM (Kineto's kernel args)
are kept, in a compact form. Solo bytes/s and FLOP/s of every kernel follow from the pieces' shapes
(``facts``) and the solo replays. torch.cuda API only (HIP builds provide it; not run on AMD hardware).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kernels_real.bench import run_env
from kernels_real.config import MoEConfig, get_preset
from kernels_real.grouped_gemm import grouped_mm, make_groups
from kernels_real.layer import MoELayer, MoEWeights, silu_and_mul
from kernels_real.profiling import chrome_trace
from kernels_real.routing import route

PRESETS = ("deepseek_v3", "qwen2_57b_a14b", "llama4_scout", "deepseek_v2_lite")
SHARDS = (1, 2, 4, 8)
TOKENS = (1, 2, 4, 16, 64)
WARM, REPS = 3, 25
SLEEP_CYCLES = 6000  # ~3 µs at ~2 GHz: the stagger
L2_FACTOR = 4  # rotate at least this many L2's worth of shared weights per graph
MAX_SETS = 16
MEMORY_BUDGET = 50e9
KERNEL_ARGS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM",
               "est. achieved occupancy %")
PAIRS = ("S|R", "R|S", "S|G", "G|S", "S|RG", "RG|S", "S~|RG", "S|~RG")
SOLOS = ("S", "R", "G", "RG", "RG+fj0", "RG+fj1", "sleep")


class Pieces:
    """The layer's pieces for one shard config and token count, on rotating weight sets."""

    def __init__(self, cfg: MoEConfig, weights: list[MoEWeights], tokens: int, device: torch.device) -> None:
        self.cfg, self.weights, self.device = cfg, weights, device
        self.layer = MoELayer(cfg, device)  # the layer's own shared-expert MLP; its grouped-GEMM backend
        self.backend = self.layer.backend
        gen = torch.Generator(device=device).manual_seed(tokens)
        self.x = torch.randn(tokens, cfg.hidden, generator=gen, device=device, dtype=getattr(torch, cfg.dtype))
        self.tiny = torch.zeros(1, device=device)
        self.routed = [self._route(w) for w in weights]  # G's inputs, computed once per set

    def shared(self, k: int) -> None:
        self.layer._shared(self.x, self.weights[k])

    def _route(self, w: MoEWeights) -> tuple[torch.Tensor, ...]:
        ids, weights = route(F.linear(self.x.float(), w.gate), self.cfg, w.bias)
        order, groups = make_groups(ids.reshape(-1), self.cfg.n_experts, capacity=self.x.shape[0])
        token = order // ids.shape[1]
        return self.x.index_select(0, token), token, order, weights, groups  # type: ignore[return-value]

    def routing(self, k: int) -> None:
        self._route(self.weights[k])

    def experts(self, k: int) -> None:
        self._experts(self.weights[k], self.routed[k])

    def routing_and_experts(self, k: int) -> None:
        self._experts(self.weights[k], self._route(self.weights[k]))

    def _experts(self, w: MoEWeights, routed: tuple[torch.Tensor, ...]) -> None:
        xs, token, order, weights, groups = routed
        n = self.cfg.n_experts
        y = grouped_mm(silu_and_mul(grouped_mm(xs, w.w13[:n], groups, self.backend)), w.w2[:n], groups,
                       self.backend)
        scale = weights.reshape(-1).index_select(0, order).unsqueeze(1)
        out = torch.zeros(self.x.shape[0], self.x.shape[1], dtype=torch.float32, device=self.device)
        out.index_add_(0, token, y.float() * scale)

    def sleep(self, k: int) -> None:
        torch.cuda._sleep(SLEEP_CYCLES)

    def tiny_kernel(self, k: int) -> None:
        self.tiny.add_(1.0)


def _side(p: Pieces, code: str) -> Callable[[int], None]:
    return {"S": p.shared, "R": p.routing, "G": p.experts, "RG": p.routing_and_experts}[code]


def forked(aux: torch.cuda.Stream, aux_work: Callable[[int], None] | None, main_work: Callable[[int], None],
           aux_first: bool) -> Callable[[int], None]:
    """One set's fork/join: main records, aux waits, aux work, aux records, main work, main waits (the order
    the two branches are captured in is ``aux_first``)."""
    def step(k: int) -> None:
        main = torch.cuda.current_stream()
        ready, done = torch.cuda.Event(), torch.cuda.Event()
        ready.record(main)

        def aux_branch() -> None:
            with torch.cuda.stream(aux):
                aux.wait_event(ready)
                if aux_work is not None:
                    aux_work(k)
                done.record(aux)
        if aux_first:
            aux_branch()
            main_work(k)
        else:
            main_work(k)
            aux_branch()
        main.wait_event(done)
    return step


def _with_sleep(p: Pieces, work: Callable[[int], None]) -> Callable[[int], None]:
    def step(k: int) -> None:
        p.sleep(k)
        work(k)
    return step


def graph_steps(p: Pieces, aux: torch.cuda.Stream) -> dict[str, Callable[[int], None]]:
    """Every solo and paired step of one configuration, by name."""
    steps: dict[str, Callable[[int], None]] = {code: _side(p, code) for code in ("S", "R", "G", "RG")}
    steps["RG+fj0"] = forked(aux, None, p.routing_and_experts, aux_first=True)
    steps["RG+fj1"] = forked(aux, p.tiny_kernel, p.routing_and_experts, aux_first=True)
    steps["sleep"] = p.sleep
    for name in PAIRS:
        left, right = name.split("|")
        aux_first = left.startswith("S")
        shared_code, other = (left, right) if aux_first else (right, left)
        shared = _with_sleep(p, p.shared) if shared_code == "S~" else p.shared
        main = _with_sleep(p, _side(p, other[1:])) if other.startswith("~") else _side(p, other)
        steps[name] = forked(aux, shared, main, aux_first)
    return steps


def capture(step: Callable[[int], None], sets: int) -> torch.cuda.CUDAGraph:
    """A graph of ``step`` over every weight set (after one eager warm-up call per set)."""
    for k in range(sets):
        step(k)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for k in range(sets):
            step(k)
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, sets: int) -> list[float]:
    """µs per weight set of REPS event-timed replays after WARM warm-ups."""
    for _ in range(WARM):
        graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
    for s, e in zip(starts, ends, strict=True):
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 / sets for s, e in zip(starts, ends, strict=True)]


def profile_kernels(graphs: dict[str, torch.cuda.CUDAGraph]) -> dict[str, list[list[Any]]]:
    """Per graph, the kernels of one profiled replay: ``[name index, stream, start µs, dur µs, *KERNEL_ARGS]``
    (start from the replay's first kernel); the names are in ``names`` (first use order)."""
    from torch.profiler import record_function

    def replay_each() -> None:
        for name, graph in graphs.items():
            with record_function(f"graph:{name}"):
                graph.replay()
            torch.cuda.synchronize()

    trace = json.loads(chrome_trace(replay_each, gpu=True))
    return kernels_by_graph(trace.get("traceEvents", []))


def kernels_by_graph(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Group a trace's kernels by the ``graph:NAME`` range whose graph launch they correlate with."""
    ranges = [(e["ts"], e["ts"] + e.get("dur", 0), e["name"][6:]) for e in events
              if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("graph:")]
    launch_graph: dict[Any, str] = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and "GraphLaunch" in str(e.get("name", "")):
            for lo, hi, name in ranges:
                if lo <= e["ts"] <= hi:
                    launch_graph[e.get("args", {}).get("correlation")] = name
    names: list[str] = []
    index: dict[str, int] = {}
    out: dict[str, list[list[Any]]] = {}
    for e in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        args = e.get("args", {})
        graph = launch_graph.get(args.get("correlation")) or _range_at(ranges, e["ts"])
        if graph is None:
            continue
        if e["name"] not in index:
            index[e["name"]] = len(names)
            names.append(e["name"])
        out.setdefault(graph, []).append([index[e["name"]], args.get("stream"), e["ts"], e["dur"],
                                          *(args.get(k) for k in KERNEL_ARGS)])
    for rows in out.values():
        t0 = rows[0][2]
        for row in rows:
            row[2] = round(row[2] - t0, 3)
    return {"names": names, "fields": ["name", "stream", "start_us", "dur_us", *KERNEL_ARGS], "graphs": out}


def _range_at(ranges: list[tuple[float, float, str]], ts: float) -> str | None:
    """The last ``graph:`` range begun before ``ts`` (a replay's kernels run after its launch, before the next
    range: the host synchronises between replays)."""
    begun = [r for r in ranges if r[0] <= ts]
    return max(begun)[2] if begun else None


def weight_sets(cfg: MoEConfig, l2_bytes: int) -> int:
    """Enough sets that the shared weights rotate through several L2s, within the memory budget."""
    width = 2 if cfg.dtype != "float32" else 4
    shared = max(1, 3 * cfg.hidden * cfg.shared_total * width)
    want = max(2, math.ceil(L2_FACTOR * l2_bytes / shared))
    return max(1, min(MAX_SETS, want, int(MEMORY_BUDGET // cfg.weight_bytes())))


def run_config(cfg: MoEConfig, tokens: list[int], device: torch.device, l2: int) -> list[dict[str, Any]]:
    """Every graph of one shard config at each token count: timings and one profiled replay each."""
    sets = weight_sets(cfg, l2)
    weights = [MoEWeights.random(cfg, device, seed=200 + k) for k in range(sets)]
    aux = torch.cuda.Stream(device)
    records = []
    for m in tokens:
        pieces = Pieces(cfg, weights, m, device)
        graphs = {name: capture(step, sets) for name, step in graph_steps(pieces, aux).items()}
        timed = {name: replay_us(g, sets) for name, g in graphs.items()}
        kernels = profile_kernels(graphs)
        records.append({"preset": cfg.name, "tokens": m, "weight_sets": sets,
                        "median_us": {k: statistics.median(v) for k, v in timed.items()},
                        "samples_us": {k: [round(x, 3) for x in v] for k, v in timed.items()},
                        "kernels": kernels, "backend": pieces.backend})
        del graphs, pieces
    del weights
    torch.cuda.empty_cache()
    return records


def summary_line(rec: dict[str, Any]) -> str:
    m = rec["median_us"]
    gain = 1 - m["S|RG"] / (m["S"] + m["RG"])
    return (f"{rec['preset']:<24} t{rec['tokens']:<3} S {m['S']:8.1f} RG {m['RG']:8.1f} S|RG {m['S|RG']:8.1f} "
            f"gain {100 * gain:+5.1f}% fj0 {m['RG+fj0'] - m['RG']:+5.2f} fj1 {m['RG+fj1'] - m['RG']:+5.2f} µs")


def write(out: Path, env: dict[str, Any], records: list[dict[str, Any]]) -> None:
    (out / "env.json").write_text(json.dumps(env, indent=1))
    (out / "graph_corun.json.gz").write_bytes(gzip.compress(json.dumps(records).encode(), 6))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.microbench.graph_corun", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="output folder (graph_corun.json.gz, env.json)")
    p.add_argument("--presets", nargs="+", default=list(PRESETS))
    p.add_argument("--shards", nargs="+", type=int, default=list(SHARDS), help="tensor-parallel shards")
    p.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS))
    p.add_argument("--budget-s", type=float, default=240.0, help="skip remaining configs after this many s")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: needs a CUDA/ROCm GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 60 << 20)
    args.out.mkdir(parents=True, exist_ok=True)
    started, records, skipped = time.monotonic(), [], []
    env = run_env(device, __doc__) | {"sleep_cycles": SLEEP_CYCLES, "reps": REPS, "skipped_configs": skipped}
    for name in args.presets:
        for shard in args.shards:
            cfg = get_preset(name if shard == 1 else f"{name}@tp{shard}")
            if time.monotonic() - started > args.budget_s:
                skipped.append(cfg.name)
                continue
            for rec in run_config(cfg, args.tokens, device, l2):
                records.append(rec)
                print(summary_line(rec), flush=True)
            env["elapsed_s"] = round(time.monotonic() - started, 1)
            write(args.out, env, records)  # after every config: a run cut short keeps what it measured
    write(args.out, env, records)
    print(f"[graph_corun] {len(records)} configs in {env['elapsed_s']} s; skipped {skipped}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
