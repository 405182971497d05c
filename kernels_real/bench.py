"""Benchmark harness: presets × token counts × strategies × {eager, graph} on one GPU (or tiny shapes on CPU).

``python -m kernels_real.bench --out DIR [--presets ...] [--tokens ...] [--quick] [--device cpu]`` writes
``DIR/cases.json`` (one record per measured case), ``DIR/env.json`` (GPU, driver, versions, clocks seen,
skipped cases), ``DIR/kernels.json`` (per-kernel durations of the traced cases), ``DIR/traces/*.json.gz``
(Kineto traces, ``record_shapes=True``; an eager trace holds ``--eager-trace-calls`` back-to-back layer calls,
``moesim_layers_per_trace`` in its metadata) and ``DIR/gains.md`` (overlap gains vs sequential).
``--interleave-eager`` times all eager cases of a preset interleaved, ``--interleave-graph`` the graphs of
all strategies of a token count; ``--trace-only`` traces without timing.
ROCm was not run: the code uses only stream/event APIs that HIP builds of torch provide.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import gzip
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import torch

from kernels_real.config import ConfigError, MoEConfig, get_preset
from kernels_real.host_costs import host_sample, summarize
from kernels_real.layer import MoELayer, MoEWeights
from kernels_real.profiling import chrome_trace
from kernels_real.streams import current_stream, platform_info, reset_current_stream
from kernels_real.timing import time_steps
from simulator.outputs import write_bytes_atomic, write_text_atomic
from simulator.workloads.presets import STRATEGIES

DEFAULT_TOKENS = tuple(2**i for i in range(11))  # 1 .. 1024
QUICK_TOKENS = (1, 16)
MODES = ("eager", "graph")
# the presets measured (llama4_maverick, in the shape table for decode-step scenarios, never was)
DEFAULT_PRESETS = ("deepseek_v3", "kimi_k2", "qwen2_57b_a14b", "llama4_scout", "deepseek_v2_lite", "qwen3_30b_a3b")
TRACE_PRESETS = ("deepseek_v3", "qwen2_57b_a14b", "deepseek_v2_lite")
TRACE_TOKENS = (1, 16, 128, 1024)
WEIGHT_BYTES_BUDGET = 72e9  # rotating weight sets per preset: well over L2 (60 MB), inside the H200's memory
MAX_WEIGHT_SETS = 4
GRAPH_ROUNDS = 12  # --interleave-graph: rounds of bursts of replays, strategies of a token count alternating
EAGER_ROUNDS = 40  # --interleave-eager: rounds of short bursts (more, shorter bursts average out host drift)
QUICK_EAGER_ROUNDS = 5
MIN_BURST = 2  # back-to-back calls per burst, at least (and one more than the weight sets: see _record_case)
ORDER_SEED = 20261202  # the interleaved order is shuffled once with this seed


K = TypeVar("K")


class BenchInputError(ValueError):
    """Bad command-line input."""


def _write_json(path: Path, obj: object) -> None:
    """``obj`` as indented JSON, written atomically."""
    write_text_atomic(path, json.dumps(obj, indent=1) + "\n")


def _nvidia_smi() -> dict[str, str]:
    """GPU name, driver and clocks as nvidia-smi reports them now (or why it could not)."""
    fields = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"unavailable": f"{type(exc).__name__}: {exc}"}
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    return dict(zip(fields.split(","), values, strict=False)) | {"time": dt.datetime.now().isoformat()}


def _run_record(device: torch.device) -> dict[str, object]:
    """What every run record starts with: date, arguments, platform and that ROCm was not run."""
    return {"date": dt.datetime.now().isoformat(timespec="seconds"), "argv": sys.argv[1:], **platform_info(device),
            "rocm_note": "ROCm was not run here; the code uses only APIs HIP torch provides"}


def run_env(device: torch.device, how: str | None) -> dict[str, object]:
    """Where and when a GPU script ran: the run record, nvidia-smi now and how it measured (``how``)."""
    return _run_record(device) | {"nvidia_smi": _nvidia_smi(), "how": how}


def _stats(samples_us: list[float]) -> dict[str, float]:
    ordered = sorted(samples_us)
    return {
        "median_us": statistics.median(ordered),
        "min_us": ordered[0],
        "p90_us": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "mean_us": statistics.fmean(ordered),
    }


class Timer:
    """Per-iteration layer times: CUDA events on GPU, perf_counter on CPU."""

    def __init__(self, gpu: bool, target_s: float, min_n: int, max_n: int) -> None:
        self.gpu, self.target_s, self.min_n, self.max_n = gpu, target_s, min_n, max_n

    def measure(self, step: Callable[[int], None], layers_per_step: int) -> list[float]:
        """Warm up, pick a replay count from a short estimate, time each step; µs per layer."""
        for i in range(3):
            step(i)
        est = self._run(step, 3, layers_per_step)
        per_step_s = max(statistics.median(est) * layers_per_step * 1e-6, 1e-6)
        n = max(self.min_n, min(self.max_n, int(self.target_s / per_step_s)))
        return self._run(step, n, layers_per_step)

    def measure_interleaved(self, steps: dict[K, Callable[[int], None]], rounds: int, seed: int = ORDER_SEED,
                            group: Callable[[K], object] | None = None, min_burst: int = MIN_BURST,
                            after: Callable[[K], None] | None = None) -> dict[K, list[list[float]]]:
        """Eager timing of many cases interleaved: ``rounds`` rounds, each running every case's short burst of
        back-to-back calls in one fixed order (shuffled once with ``seed``), so that slow drifts of the host
        (clock, scheduling) hit every case alike; GC off while timing. Returns each case's bursts (µs per
        call, the burst's first call first: it starts on an idle device and carries the host's head start).
        A burst has ``target_s / rounds`` of calls (at least ``min_burst``); cases with the same ``group``
        get the same burst length (the longest of them), so their shares of first calls match. Call ``i`` of
        a burst is ``step(i)``. ``after(key)`` runs after each burst of ``key`` (untimed), in the same round."""
        for step in steps.values():
            for i in range(3):
                step(i)
        per_call_s = {key: max(statistics.median(self._run(step, 3, 1)) * 1e-6, 1e-6) for key, step in steps.items()}
        calls = {key: max(min_burst, int(self.target_s / rounds / s)) for key, s in per_call_s.items()}
        if group is not None:
            longest: dict[object, int] = {}
            for key, n in calls.items():
                longest[group(key)] = max(longest.get(group(key), 0), n)
            calls = {key: longest[group(key)] for key in calls}
        order = list(steps)
        random.Random(seed).shuffle(order)
        bursts: dict[K, list[list[float]]] = {key: [] for key in steps}
        gc.disable()
        try:
            for _ in range(rounds):
                for key in order:
                    bursts[key].append(self._run(steps[key], calls[key], 1))
                    if after is not None:
                        after(key)
        finally:
            gc.enable()
        return bursts

    def _run(self, step: Callable[[int], None], n: int, layers_per_step: int) -> list[float]:
        return [t / layers_per_step for t in time_steps(step, n, self.gpu)]


OCCUPANCY_ARGS = ("registers per thread", "shared memory", "blocks per SM", "est. achieved occupancy %")


def _kernels_from_trace(trace: dict) -> list[dict[str, object]]:
    """Each GPU kernel of a Kineto trace: name, start (µs after the first kernel's), duration (µs), stream,
    grid, block and, where Kineto records them, its occupancy figures."""
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    kernels.sort(key=lambda e: e["ts"])
    first = kernels[0]["ts"] if kernels else 0.0
    records = []
    for e in kernels:
        args = e.get("args", {})
        records.append({"name": e["name"], "start_us": round(e["ts"] - first, 3), "dur_us": e["dur"],
                        "stream": args.get("stream"), "grid": args.get("grid"), "block": args.get("block"),
                        **{key: args[key] for key in OCCUPANCY_ARGS if key in args}})
    return records


def _trace(fn: Callable[[], None], path: Path, meta: dict[str, object], gpu: bool) -> list[dict[str, object]]:
    """Profile one call of ``fn`` into ``path`` (gzip Chrome trace, with ``cuda_sync`` records on a GPU: which
    event each stream wait waited on) and return its kernels."""
    raw = chrome_trace(fn, gpu, meta, record_shapes=True)
    write_bytes_atomic(path, gzip.compress(raw, compresslevel=6))
    return _kernels_from_trace(json.loads(raw))


class GraphStep:
    """One replay of a CUDA graph; holds the captured input and weights, which the graph reads by address: they
    must outlive it (freed, their memory would be reused and a replay would route other data)."""

    def __init__(self, graph: torch.cuda.CUDAGraph, x: torch.Tensor, weights: list[MoEWeights]) -> None:
        self.graph, self.x, self.weights = graph, x, weights

    def __call__(self, i: int) -> None:
        self.graph.replay()


def graph_step(layer: MoELayer, weights: list[MoEWeights], x: torch.Tensor, strategy: str,
               calls: int | None = None) -> GraphStep:
    """Capture ``calls`` layer calls (default: one per weight set), call i on weight set i mod W, into a CUDA
    graph (after one eager warm-up call per set); the step replays it (its index is unused)."""
    for w in weights:
        layer(x, w, strategy)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(len(weights) if calls is None else calls):
            layer(x, weights[i % len(weights)], strategy)
    return GraphStep(graph, x, weights)


def weight_seed(index: int) -> int:
    """The seed of weight set ``index`` (``MoEWeights.random``)."""
    return 100 + index


def bench_input(cfg: MoEConfig, tokens: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The layer input the bench times at ``tokens`` tokens (seeded by the token count)."""
    gen = torch.Generator(device=device).manual_seed(7 + tokens)
    return torch.randn(tokens, cfg.hidden, generator=gen, device=device, dtype=dtype)


def _weight_sets(cfg: MoEConfig, gpu: bool, override: int | None) -> int:
    if override:
        return override
    if not gpu:
        return 2
    free, _ = torch.cuda.mem_get_info()
    budget = min(WEIGHT_BYTES_BUDGET, 0.8 * free)
    return min(MAX_WEIGHT_SETS, int(budget // cfg.weight_bytes()))


@dataclass(frozen=True)
class BenchOptions:
    """One invocation's command line, checked, with its defaults filled in (see ``_parse`` for each option)."""

    out: Path
    configs: tuple[MoEConfig, ...]  # the presets' shapes (scaled down on CPU)
    tokens: tuple[int, ...]
    strategies: tuple[str, ...]
    modes: tuple[str, ...]
    trace_presets: tuple[str, ...]
    trace_tokens: tuple[int, ...]
    weight_sets: int | None
    device: str
    quick: bool
    budget_s: float
    print_json: bool
    interleave_graph: bool
    interleave_eager: bool
    eager_trace_calls: int | None
    graph_trace_replays: int
    trace_timed_graphs: bool
    trace_only: bool
    host_costs: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchOptions:
        """Check the parsed command line (:class:`BenchInputError`, or ``ConfigError`` for a preset)."""
        for s in args.strategies:
            if s not in STRATEGIES:
                raise BenchInputError(f"unknown strategy {s!r}; known: {', '.join(STRATEGIES)}")
        for m in args.modes:
            if m not in MODES:
                raise BenchInputError(f"unknown mode {m!r}; known: {', '.join(MODES)}")
        tokens = args.tokens or list(QUICK_TOKENS if args.quick else DEFAULT_TOKENS)
        if any(t < 1 for t in tokens):
            raise BenchInputError("token counts must be >= 1")
        if args.eager_trace_calls is not None and args.eager_trace_calls < 1:
            raise BenchInputError("--eager-trace-calls must be >= 1")
        if args.graph_trace_replays < 1:
            raise BenchInputError("--graph-trace-replays must be >= 1")
        if args.host_costs and not (args.interleave_eager and "eager" in args.modes):
            raise BenchInputError("--host-costs samples the host between interleaved eager bursts: give it with "
                                  "--interleave-eager and the eager mode")
        if args.weight_sets is not None and args.weight_sets < 1:
            raise BenchInputError("--weight-sets must be >= 1")
        if args.device == "cuda" and not torch.cuda.is_available():
            raise BenchInputError("no CUDA/ROCm device visible to torch; use --device cpu for the tiny CPU run")
        configs = [get_preset(name) for name in args.presets]
        trace_presets = args.trace_presets
        if trace_presets is None:
            chosen = [c.name for c in configs if c.name in TRACE_PRESETS] or [configs[0].name]
            trace_presets = chosen[:1] if args.quick else chosen
        for name in trace_presets:
            get_preset(name)
        trace_tokens = args.trace_tokens
        if trace_tokens is None:
            trace_tokens = [max(tokens)] if args.quick else list(TRACE_TOKENS)
        return cls(
            out=args.out, configs=tuple(c if args.device == "cuda" else c.scaled_down() for c in configs),
            tokens=tuple(tokens), strategies=tuple(args.strategies), modes=tuple(args.modes),
            trace_presets=tuple(trace_presets), trace_tokens=tuple(trace_tokens), weight_sets=args.weight_sets,
            device=args.device, quick=args.quick, budget_s=args.budget_s, print_json=args.json,
            interleave_graph=args.interleave_graph, interleave_eager=args.interleave_eager,
            eager_trace_calls=args.eager_trace_calls, graph_trace_replays=args.graph_trace_replays,
            trace_timed_graphs=args.trace_timed_graphs, trace_only=args.trace_only, host_costs=args.host_costs)


class Sweep:
    """Runs the cases of one invocation and accumulates records.

    Per preset: its layer and weight sets are loaded, each case's step prepared (``_prepare``), then timed
    (:meth:`time_preset`) or traced (:meth:`trace_preset`). Tracing runs after all timing because a profiler
    session can leave CUPTI hooks that slow later kernel launches, which would bias eager timings measured after
    it; with ``--trace-timed-graphs`` the graph cases to trace are traced at the end of their preset's timing, on
    the graph instances that were timed (run one preset per process then, so no profiler session precedes another
    preset's timing)."""

    def __init__(self, options: BenchOptions) -> None:
        self.options = options
        self.out = options.out
        self.gpu = options.device == "cuda"
        self.device = torch.device(options.device)
        self.deadline = time.monotonic() + options.budget_s
        target = 0.02 if options.quick else 0.12
        self.timer = Timer(self.gpu, target, 5 if options.quick else 10, 50 if options.quick else 300)
        self.cases: list[dict[str, object]] = []
        self.kernels: list[dict[str, object]] = []
        self.skipped: list[str] = []
        self.clocks: list[dict[str, str]] = []
        self.weight_sets: dict[str, int] = {}  # per preset, chosen once: the trace pass holds the timed sets

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def time_preset(self, cfg: MoEConfig) -> None:
        """Time every case of one preset: one at a time, or interleaved (``--interleave-eager``: every eager
        case of the preset; ``--interleave-graph``: the graphs of every strategy at a token count)."""
        self._with_weights(cfg, self._time_cases)

    def trace_preset(self, cfg: MoEConfig, tokens: list[int]) -> None:
        """Trace the cases of one preset at ``tokens`` (graphs traced at their timing excepted)."""
        self._with_weights(cfg, partial(self._trace_cases, tokens=tokens))

    def tokens_to_trace(self, cfg: MoEConfig) -> list[int]:
        """The token counts of the trace pass for a preset: none unless it is a trace preset and was timed (or
        ``--trace-only``)."""
        options = self.options
        if not options.trace_only and cfg.name not in {c["preset"] for c in self.cases}:
            return []
        if cfg.name.removesuffix("-tiny") not in options.trace_presets:
            return []
        return [t for t in options.tokens if t in set(options.trace_tokens)]

    def _with_weights(self, cfg: MoEConfig, work: Callable[[MoEConfig, MoELayer, list[MoEWeights]], None]) -> None:
        """Run ``work`` on the preset's layer and rotating weight sets, then free them (a preset whose one
        weight set does not fit is skipped)."""
        # chosen once per preset (by the memory free then): the trace pass, later, must hold the same weight
        # sets as the timing, whatever memory is free by then
        if cfg.name not in self.weight_sets:
            self.weight_sets[cfg.name] = _weight_sets(cfg, self.gpu, self.options.weight_sets)
        n_sets = self.weight_sets[cfg.name]
        if n_sets < 1:
            size = cfg.weight_bytes() / 1e9
            self.skipped.append(f"{cfg.name}: one weight set ({size:.1f} GB) does not fit")
            return
        layer = MoELayer(cfg, self.device)
        weights = [MoEWeights.random(cfg, self.device, seed=weight_seed(k)) for k in range(n_sets)]
        work(cfg, layer, weights)
        del weights, layer
        gc.collect()
        if self.gpu:
            torch.cuda.empty_cache()

    def _inputs(self, cfg: MoEConfig, layer: MoELayer, tokens: list[int] | tuple[int, ...]
                ) -> Iterator[tuple[int, torch.Tensor]]:
        """Each token count with its input (seeded by the token count)."""
        for t in tokens:
            yield t, bench_input(cfg, t, self.device, layer.dtype)

    def _runnable(self, cfg: MoEConfig, tokens: int, trace_pass: bool) -> Iterator[tuple[str, str]]:
        """The (strategy, mode) cases of a token count that apply to the preset and run on this device; each
        checked against ``--budget-s`` when its turn comes (the ones too late are noted as skipped)."""
        for strategy in self.options.strategies:
            if cfg.applicable(strategy):
                continue
            for mode in self.options.modes:
                if mode == "graph" and not self.gpu:
                    continue
                if self.out_of_time():
                    label = f"{cfg.name} tokens={tokens} {strategy} {mode}" + (" (trace)" if trace_pass else "")
                    self.skipped.append(f"{label}: --budget-s {self.options.budget_s} s ran out")
                    continue
                yield strategy, mode

    def _traced_at_timing(self, cfg: MoEConfig, tokens: int, mode: str) -> bool:
        """Whether a case is traced on the graph that was timed (``--trace-timed-graphs``)."""
        options = self.options
        return (mode == "graph" and options.trace_timed_graphs and tokens in options.trace_tokens
                and cfg.name.removesuffix("-tiny") in options.trace_presets)

    def _time_cases(self, cfg: MoEConfig, layer: MoELayer, weights: list[MoEWeights]) -> None:
        options = self.options
        n_sets = len(weights)
        eager_steps: dict[tuple[int, str], Callable[[int], None]] = {}
        traced_graphs: list[tuple[int, str, Callable[[int], None], int]] = []
        for t, x in self._inputs(cfg, layer, options.tokens):
            graph_steps: dict[str, Callable[[int], None]] = {}
            for strategy, mode in self._runnable(cfg, t, trace_pass=False):
                step, layers_per_step = self._prepare(layer, weights, x, strategy, mode)
                if self._traced_at_timing(cfg, t, mode):
                    traced_graphs.append((t, strategy, step, layers_per_step))
                if mode == "eager" and options.interleave_eager:
                    eager_steps[(t, strategy)] = step
                elif mode == "graph" and options.interleave_graph:
                    graph_steps[strategy] = step
                else:
                    self._time_case(cfg, layer, t, strategy, mode, step, layers_per_step, n_sets)
            if graph_steps:
                self._time_graphs_interleaved(cfg, layer, t, graph_steps, n_sets)
        if eager_steps:
            self._time_eager_interleaved(cfg, layer, eager_steps, n_sets)
        for t, strategy, step, layers_per_step in traced_graphs:  # after all of the preset's timing
            self._trace_case(cfg, layer, t, strategy, "graph", step, layers_per_step, n_sets)

    def _trace_cases(self, cfg: MoEConfig, layer: MoELayer, weights: list[MoEWeights], tokens: list[int]) -> None:
        for t, x in self._inputs(cfg, layer, tokens):
            for strategy, mode in self._runnable(cfg, t, trace_pass=True):
                if self._traced_at_timing(cfg, t, mode):
                    continue  # traced right after its timing, on the graph that was timed
                step, layers_per_step = self._prepare(layer, weights, x, strategy, mode)
                self._trace_case(cfg, layer, t, strategy, mode, step, layers_per_step, len(weights))

    def _prepare(self, layer: MoELayer, weights: list[MoEWeights], x: torch.Tensor, strategy: str,
                 mode: str) -> tuple[Callable[[int], None], int]:
        """The step to repeat (one eager layer call, or one replay of a graph of all weight sets)."""
        n_sets = len(weights)
        if mode == "eager":
            def step(i: int) -> None:
                layer(x, weights[i % n_sets], strategy)
            return step, 1
        return graph_step(layer, weights, x, strategy), n_sets

    def _time_case(self, cfg: MoEConfig, layer: MoELayer, tokens: int, strategy: str, mode: str,
                   step: Callable[[int], None], layers_per_step: int, n_sets: int) -> None:
        samples = self.timer.measure(step, layers_per_step)
        self._record_case(cfg, layer, tokens, strategy, mode, samples, layers_per_step, n_sets,
                          "one strategy at a time")

    def _time_eager_interleaved(self, cfg: MoEConfig, layer: MoELayer,
                                steps: dict[tuple[int, str], Callable[[int], None]], n_sets: int) -> None:
        """Time every eager case of the preset (all token counts × strategies) interleaved
        (``Timer.measure_interleaved``), bursts of one length per token count."""
        rounds = QUICK_EAGER_ROUNDS if self.options.quick else EAGER_ROUNDS
        min_burst = max(MIN_BURST, n_sets + 1)  # every weight set has steady calls
        order = (f"interleaved across all tokens × strategies of the preset, {rounds} rounds "
                 f"(order shuffled once, seed {ORDER_SEED}; bursts of >= {min_burst} back-to-back calls, "
                 "call i of a burst on weight set i mod weight_sets, the same length for every strategy of a "
                 "token count)")
        host: dict[tuple[int, str], list[dict[str, object]]] = {key: [] for key in steps}
        after = (lambda key: host[key].append(host_sample(steps[key], self.gpu))) if self.options.host_costs else None
        timed = self.timer.measure_interleaved(steps, rounds, group=lambda key: key[0], min_burst=min_burst,
                                               after=after)
        for (t, strategy), bursts in sorted(timed.items()):
            self._record_case(cfg, layer, t, strategy, "eager", [x for b in bursts for x in b], 1, n_sets,
                              order, bursts)
            if host[(t, strategy)]:
                self.cases[-1].update(summarize(host[(t, strategy)]))

    def _time_graphs_interleaved(self, cfg: MoEConfig, layer: MoELayer, tokens: int,
                                 steps: dict[str, Callable[[int], None]], n_sets: int) -> None:
        """Time the graphs of every strategy at one token count in alternation: ``GRAPH_ROUNDS`` rounds, each a
        burst of back-to-back replays per strategy (order shuffled once); a burst's first replay (launched
        onto an idle device) is dropped. Drifts of the device between cases then hit every strategy alike."""
        timed = self.timer.measure_interleaved(steps, GRAPH_ROUNDS, min_burst=3)
        order = (f"strategies of the token count interleaved, {GRAPH_ROUNDS} rounds of bursts of back-to-back "
                 f"replays (order shuffled once, seed {ORDER_SEED}); each burst's first replay dropped")
        for strategy, bursts in timed.items():
            samples = [x / n_sets for b in bursts for x in b[1:]]
            self._record_case(cfg, layer, tokens, strategy, "graph", samples, n_sets, n_sets, order)

    def _record_case(self, cfg: MoEConfig, layer: MoELayer, tokens: int, strategy: str, mode: str,
                     samples: list[float], layers_per_step: int, n_sets: int, order: str,
                     bursts: list[list[float]] | None = None) -> None:
        """One case record; with ``bursts`` (call ``i`` of a burst ran weight set ``i % n_sets``) also the raw
        bursts, the burst length, the medians of the bursts' first calls and of the calls after them
        (``steady_median_us``: back-to-back calls behind the previous one), and per weight set the median of
        its steady calls with their mean (``steady_sets_mean_us``). The weight sets route tokens differently,
        so their calls can differ by more than the effects measured (grouped GEMMs 17 % apart on deepseek_v3
        at 16 tokens): the steady median alone is one set's time when bursts are short, the mean over sets is
        what a trace of one call per set (or a graph of all sets) shows."""
        record: dict[str, object] = {
            "preset": cfg.name, "tokens": tokens, "strategy": strategy, "mode": mode,
            **_stats(samples), "replays": len(samples), "weight_sets": n_sets,
            "layers_per_replay": layers_per_step, "backend": layer.backend, "device": self.options.device,
            "timer": "cuda_events" if self.gpu else "perf_counter", "order": order, "trace": None,
        }
        if bursts:
            record["burst_calls"] = len(bursts[0])
            record["first_median_us"] = statistics.median(b[0] for b in bursts)
            record["steady_median_us"] = statistics.median(x for b in bursts for x in b[1:])
            per_set = [[x for b in bursts for i, x in enumerate(b) if i and i % n_sets == s] for s in range(n_sets)]
            if all(per_set):
                record["steady_set_medians_us"] = [statistics.median(xs) for xs in per_set]
                record["steady_sets_mean_us"] = statistics.fmean(record["steady_set_medians_us"])
            record["bursts_us"] = bursts
        self.cases.append(record)

    def _trace_case(self, cfg: MoEConfig, layer: MoELayer, tokens: int, strategy: str, mode: str,
                    step: Callable[[int], None], layers_per_step: int, n_sets: int) -> None:
        """Trace one case: eager, ``--eager-trace-calls`` (default: one per weight set) warmed back-to-back layer
        calls (one sync before and after); graph, ``--graph-trace-replays`` replays. Metadata comes from the
        timed record, or (``--trace-only``, or a case not timed) lacks ``median_us``."""
        key = (cfg.name, tokens, strategy, mode)
        matches = (c for c in self.cases if (c["preset"], c["tokens"], c["strategy"], c["mode"]) == key)
        record = next(matches, None)
        if record is None and not self.options.trace_only:
            return
        for i in range(3):  # warm-up, as before timing
            step(i)
        name = f"{cfg.name}_t{tokens}_{strategy}_{mode}.json.gz"
        meta: dict[str, object] = {"preset": cfg.name, "tokens": tokens, "strategy": strategy, "mode": mode}
        if record is not None:
            meta["median_us"] = record["median_us"]
        meta |= {"weight_sets": n_sets, "layers_per_replay": layers_per_step, "backend": layer.backend}
        if mode == "eager":
            calls = self.options.eager_trace_calls or n_sets
            layers = calls
            meta["layers_per_trace"] = layers
            meta["note"] = (f"eager: {calls} warmed layer call(s) back to back (rotating weight sets), one device "
                            "sync before and after; divide the trace's spans by layers_per_trace for per-layer "
                            "figures")
        else:
            calls = self.options.graph_trace_replays
            layers = layers_per_step * calls
            meta["note"] = (f"graph: {calls} back-to-back replay(s) of {layers_per_step} layer calls (one per "
                            "weight set)")
            meta["graph_replays_per_trace"] = calls
            meta["layers_per_trace"] = layers

        def traced() -> None:
            for i in range(calls):
                step(i)
        if record is None:
            meta["note"] = str(meta["note"]) + "; --trace-only: not timed in this run, so no median_us"
        kernels = _trace(traced, self.out / "traces" / name, meta, self.gpu)
        if record is not None:
            record["trace"] = f"traces/{name}"
        self.kernels.append({"preset": cfg.name, "tokens": tokens, "strategy": strategy, "mode": mode,
                             "trace": f"traces/{name}", "layers": layers, "solo": strategy != "multi_stream",
                             "kernels": kernels})

    def write(self, env: dict[str, object]) -> None:
        _write_json(self.out / "cases.json", self.cases)
        _write_json(self.out / "kernels.json", self.kernels)
        _write_json(self.out / "env.json", env | {"clocks_seen": self.clocks, "skipped": self.skipped})
        write_text_atomic(self.out / "gains.md", gains_markdown(self.cases, env))


def gains_markdown(cases: list[dict[str, object]], env: dict[str, object]) -> str:
    """Markdown table: gain % = (sequential − strategy) / sequential × 100 of the median layer time."""
    idx = {(c["preset"], c["tokens"], c["strategy"], c["mode"]): c["median_us"] for c in cases}
    lines = [
        "# Measured overlap gains vs sequential",
        "",
        f"Source: `kernels_real.bench`, measured on {env.get('device_name', env.get('backend'))} "
        f"on {env.get('date')} (torch {env.get('torch')}); median layer time over replays (µs); "
        "gain % = (sequential − strategy) / sequential × 100, positive = faster. ROCm was not run.",
        "",
        "| preset | mode | tokens | sequential µs | multi_stream µs | gain % | fused_shared µs | gain % |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = sorted({(c["preset"], c["mode"], c["tokens"]) for c in cases},
                  key=lambda k: (str(k[0]), str(k[1]), int(k[2])))
    for preset, mode, tokens in keys:
        seq = idx.get((preset, tokens, "sequential", mode))
        row = [str(preset), str(mode), str(tokens), f"{seq:.1f}" if seq else "—"]
        for strategy in ("multi_stream", "fused_shared"):
            val = idx.get((preset, tokens, strategy, mode))
            if val is None:
                row += ["n/a", "n/a"]
            else:
                row += [f"{val:.1f}", f"{(seq - val) / seq * 100:+.1f}" if seq else "—"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kernels_real.bench", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS),
                   help="presets to run (default: all measured)")
    p.add_argument("--tokens", nargs="+", type=int, help="token counts (default 1 2 .. 1024; --quick: 1 16)")
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), help="strategies (default: all)")
    p.add_argument("--modes", nargs="+", default=list(MODES), help="eager and/or graph (default: both)")
    p.add_argument("--trace-presets", nargs="*", help=f"presets traced (default {' '.join(TRACE_PRESETS)})")
    p.add_argument("--trace-tokens", nargs="*", type=int, help="token counts traced (default 1 16 128 1024)")
    p.add_argument("--weight-sets", type=int, help="weight sets per preset (default: by memory, at most 4)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: tiny shapes, eager only")
    p.add_argument("--quick", action="store_true", help="few tokens, short timing: a smoke run")
    p.add_argument("--budget-s", type=float, default=330.0, help="skip remaining cases after this many s")
    p.add_argument("--json", action="store_true", help="print the case records as JSON on stdout")
    p.add_argument("--interleave-graph", action="store_true",
                   help="time the graphs of all strategies of a token count in alternating bursts")
    p.add_argument("--interleave-eager", action="store_true",
                   help=f"time all eager cases of a preset (tokens x strategies) interleaved: {EAGER_ROUNDS} rounds "
                        "of short bursts in one shuffled order")
    p.add_argument("--host-costs", action="store_true",
                   help="with --interleave-eager: after each eager burst, in the same round, the host time of the "
                        "case's layer calls behind a busy GPU (host_only_us), launched onto an idle GPU "
                        "(host_idle_us) and per torch op of one call (host_ops; kernels_real.host_costs), "
                        "profiler-free")
    p.add_argument("--eager-trace-calls", type=int,
                   help="warmed back-to-back layer calls per eager trace (default: one per weight set)")
    p.add_argument("--graph-trace-replays", type=int, default=1,
                   help="back-to-back replays per graph trace (default 1; more average out the profiler's "
                        "per-replay noise)")
    p.add_argument("--trace-timed-graphs", action="store_true",
                   help="trace each traced graph case on the graph instance that was timed, after all of its "
                        "preset's timing (default: a graph captured anew in the trace pass)")
    p.add_argument("--trace-only", action="store_true",
                   help="no timing: trace the given presets x tokens x strategies x modes (no median_us in them)")
    return p.parse_args(argv)


def run(options: BenchOptions) -> int:
    """Run the sweep, write the outputs, print the gain table (or the records with --json)."""
    (options.out / "traces").mkdir(parents=True, exist_ok=True)
    sweep = Sweep(options)
    env = _run_record(sweep.device) | {
        "timing": "CUDA events per replay (GPU) or perf_counter (CPU), warm-up first; all cases timed before any "
                  "profiler session; eager calls back to back",
        "eager_trace_calls": options.eager_trace_calls or "one per weight set", "trace_only": options.trace_only}
    if sweep.gpu:
        env["nvidia_smi_before"] = _nvidia_smi()
        current_stream(safe=True)  # run on a dedicated stream, as vLLM does
    started = time.monotonic()
    try:
        for cfg in options.configs if not options.trace_only else ():
            sweep.time_preset(cfg)
            if sweep.gpu:
                sweep.clocks.append({"after_preset": cfg.name} | _nvidia_smi())
            print(f"[bench] {cfg.name}: timed at {time.monotonic() - started:.1f} s, "
                  f"{len(sweep.cases)} cases so far", file=sys.stderr, flush=True)
            sweep.write(env)
        for cfg in options.configs:
            tokens = sweep.tokens_to_trace(cfg)
            if tokens:
                sweep.trace_preset(cfg, tokens)
                print(f"[bench] {cfg.name}: traced at {time.monotonic() - started:.1f} s",
                      file=sys.stderr, flush=True)
                sweep.write(env)
    finally:
        if sweep.gpu:
            reset_current_stream()
    env["elapsed_s"] = round(time.monotonic() - started, 1)
    if sweep.gpu:
        env["nvidia_smi_after"] = _nvidia_smi()
    sweep.write(env)
    if sweep.skipped:
        print(f"[bench] skipped {len(sweep.skipped)} case(s): {sweep.skipped[0]} ...", file=sys.stderr)
    if options.print_json:
        print(json.dumps(sweep.cases, indent=1))
    else:
        print(gains_markdown(sweep.cases, env))
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry: bad input gives one line on stderr and exit code 2."""
    args = _parse(argv)
    try:
        return run(BenchOptions.from_args(args))
    except (BenchInputError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
