"""Does a microsecond ahead of the routing head change the layer's multi_stream gain? A spin kernel as a knob.

``python -m kernels_real.spacer_probe --out DIR [--presets ...] [--tokens 1 2 4] [--delays 2000 6000]
[--captures 2] [--routed-first]``

The branch probe (``calibration.microbench.branch_probe``, calls 36-37) found that a one-warp kernel of about a
microsecond on the main stream, between the fork and the routing head, made the router GEMM beside some shared
GEMMs run about twice as fast. Here the whole layer asks the same: per preset × tokens, CUDA graphs of
``sequential``, ``multi_stream`` and ``multi_stream`` with ``MoELayer(router_delay_cycles=N)`` for each ``--delays``
N (``torch.cuda._sleep(N)`` after the fork: about N / 2 ns at the H200's ~2 GHz; a graph node costs about a
microsecond however short its spin), with ``--routed-first`` also multi_stream with the routed path enqueued before
the shared experts (``MoELayer(shared_first=False)``), each captured ``--captures`` times (their own memory
pools: the memory layout moves, as in ``layout_probe``), one layer call per weight set, all timed interleaved
(``bench``'s rounds of bursts, each burst's first replay dropped). No traces.

Writes ``DIR/cases.json`` (one record per graph: preset, tokens, strategy, ``router_delay_cycles``,
``shared_first``, ``capture``, ``median_us`` per layer) and ``DIR/env.json``, and prints per point the gain of
each variant over sequential.
GPU only (CUDA; the calls are HIP-portable, ROCm was not run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

from kernels_real.bench import (
    GRAPH_ROUNDS,
    Timer,
    _nvidia_smi,
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

PRESETS = ("deepseek_v3", "deepseek_v3@tp2", "deepseek_v3@tp4", "deepseek_v3@tp8", "llama4_scout",
           "llama4_maverick@tp2", "llama4_maverick@tp4", "kimi_k2@tp4", "qwen2_57b_a14b@tp4", "deepseek_v2_lite@tp2")
Variant = tuple[str, int, bool]  # (strategy, router delay cycles, shared experts enqueued first)


def variants(delays: list[int], routed_first: bool = False) -> list[Variant]:
    out = [("sequential", 0, True), ("multi_stream", 0, True), *(("multi_stream", d, True) for d in delays)]
    return [*out, ("multi_stream", 0, False)] if routed_first else out


def probe_preset(name: str, tokens: list[int], delays: list[int], captures: int, timer: Timer,
                 routed_first: bool = False) -> list[dict[str, object]]:
    """Every graph of one preset timed: its case records."""
    device = torch.device("cuda")
    cfg = get_preset(name)
    weight_sets = _weight_sets(cfg, True, None)
    weights = [MoEWeights.random(cfg, device, seed=weight_seed(k)) for k in range(weight_sets)]
    layers = {(d, first): MoELayer(cfg, device, router_delay_cycles=d, shared_first=first)
              for _, d, first in variants(delays, routed_first)}
    records: list[dict[str, object]] = []
    for t in tokens:
        x = bench_input(cfg, t, device, layers[(0, True)].dtype)
        steps = {(strategy, d, first, k): graph_step(layers[(d, first)], weights, x, strategy)
                 for strategy, d, first in variants(delays, routed_first) for k in range(captures)}
        bursts = timer.measure_interleaved(steps, GRAPH_ROUNDS, min_burst=3)
        for (strategy, d, first, k) in steps:
            samples = [s / weight_sets for b in bursts[(strategy, d, first, k)] for s in b[1:]]
            records.append({"preset": name, "tokens": t, "strategy": strategy, "mode": "graph",
                            "router_delay_cycles": d, "shared_first": first, "capture": k,
                            "weight_sets": weight_sets, "layers_per_replay": weight_sets,
                            "backend": layers[(0, True)].backend,
                            "median_us": statistics.median(samples), "min_us": min(samples),
                            "replays": len(samples), "timer": "cuda_events",
                            "order": f"all graphs of the token count interleaved, {GRAPH_ROUNDS} rounds of bursts; "
                                     "each burst's first replay dropped"})
        del steps
    del weights, layers
    torch.cuda.empty_cache()
    return records


def variant_label(record: dict[str, object]) -> str:
    """A multi_stream variant's column: its delay in cycles, or ``routed first`` for the other capture order."""
    return "routed first" if record.get("shared_first", True) is False else f"delay {record['router_delay_cycles']}"


def gains_table(records: list[dict[str, object]]) -> str:
    """Per preset × tokens: each multi_stream variant's gain over sequential, per capture (mean of the captures'
    sequential medians as the base)."""
    labels = sorted({variant_label(r) for r in records if r["strategy"] == "multi_stream"},
                    key=lambda v: (not v.startswith("delay"), int(v.split()[-1]) if v.startswith("delay") else 0))
    lines = ["| preset | tokens | " + " | ".join(f"multi_stream, {v}" for v in labels) + " |",
             "| --- | ---: |" + " --- |" * len(labels)]
    for preset, t in sorted({(r["preset"], r["tokens"]) for r in records}):
        mine = [r for r in records if (r["preset"], r["tokens"]) == (preset, t)]
        seq = statistics.fmean(float(r["median_us"]) for r in mine if r["strategy"] == "sequential")
        cells = [" ".join(f"{100 * (1 - float(r['median_us']) / seq):+.1f} %"
                          for r in sorted(mine, key=lambda r: r["capture"])
                          if r["strategy"] == "multi_stream" and variant_label(r) == v) for v in labels]
        lines.append(f"| {preset} | {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def usage_error(args: argparse.Namespace) -> str | None:
    """Why the probe cannot run as asked (None when it can)."""
    if not torch.cuda.is_available():
        return "the spacer probe needs a CUDA/ROCm device"
    if min(args.captures, *args.tokens) < 1 or min(args.delays) < 1:
        return "--captures, --tokens and --delays must be at least 1"
    return preset_error(args.presets)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.spacer_probe", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=list(PRESETS))
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--delays", nargs="+", type=int, default=[2000, 6000],
                   help="router delays to try, GPU clock cycles (default 2000 6000: about 1 and 3 µs)")
    p.add_argument("--captures", type=int, default=2, help="graph captures per variant (default 2)")
    p.add_argument("--routed-first", action="store_true",
                   help="also multi_stream with the routed path enqueued before the shared experts (no delay)")
    args = p.parse_args(argv)
    error = usage_error(args)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    env = run_env(torch.device("cuda"), __doc__)
    timer = Timer(True, 0.12, 10, 300)
    current_stream(safe=True)  # a dedicated current stream, as the bench and vLLM
    records: list[dict[str, object]] = []
    try:
        for name in args.presets:
            more = probe_preset(name, args.tokens, args.delays, args.captures, timer, args.routed_first)
            records += more
            print(f"{name}: {len(more)} graphs timed", flush=True)
    finally:
        reset_current_stream()
    args.out.mkdir(parents=True, exist_ok=True)
    _write_json(args.out / "cases.json", records)
    _write_json(args.out / "env.json", env | {"nvidia_smi_after": _nvidia_smi()})
    print(gains_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
