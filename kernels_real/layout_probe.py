"""Does the layer's measured multi_stream gain depend on where its buffers sit? An A/A test of graph captures
and of weight copies.

``python -m kernels_real.layout_probe --out DIR [--presets ...] [--tokens 1 2 4] [--weight-sets N] [--copies 2]
[--captures 2] [--no-trace]``

Per preset, two copies of its weight sets (the same seeds, so the same values, at other addresses). Per token
count × copy × strategy (sequential, multi_stream), two CUDA-graph captures of one layer call per weight set (as
``bench`` captures them); each capture gets its own memory pool, so its intermediates sit at other addresses.
Nothing else differs between the graphs of a strategy: same input, same weights' values, same kernels. All
graphs of a token count are timed interleaved (``bench``'s rounds of bursts, each burst's first replay dropped),
then each is traced once (one replay; the kernels kept: name, stream, start, duration, grid, block), unless
``--no-trace``. ``--copies`` / ``--captures`` set the layouts; where the copies do not fit in memory, one copy
gets as many captures as there were layouts. The weight sets per copy default to as many as ``bench`` takes.

Writes ``DIR/cases.json`` (one record per graph: preset, tokens, strategy, ``weights_copy``, ``capture``,
``median_us`` per layer, ...), ``DIR/kernels.json.gz`` (the traced kernels per graph, no raw traces) and
``DIR/env.json``, and prints per preset × tokens the multi_stream gain of each (copy, capture) and the largest
A/A difference (the same strategy, another copy or capture). GPU only (CUDA; the calls are HIP-portable, ROCm
was not run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from kernels_real.bench import (
    GRAPH_ROUNDS,
    Timer,
    _kernels_from_trace,
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
from kernels_real.profiling import chrome_trace
from kernels_real.streams import current_stream, reset_current_stream
from simulator.outputs import write_bytes_atomic

STRATEGIES = ("sequential", "multi_stream")


@dataclass(frozen=True)
class Layouts:
    """How many weight copies and captures per strategy, and whether each graph is traced."""

    copies: int = 2
    captures: int = 2
    trace: bool = True

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return [(c, k) for c in range(self.copies) for k in range(self.captures)]


def fitted(layouts: Layouts, weight_bytes: float, weight_sets: int, free_bytes: float) -> Layouts:
    """``layouts``, or one copy with as many captures per copy as it had layouts when its copies do not fit in
    0.85 of the free memory (the captures still move the intermediates)."""
    if layouts.copies * weight_sets * weight_bytes <= 0.85 * free_bytes:
        return layouts
    return Layouts(1, layouts.copies * layouts.captures, layouts.trace)


def probe_preset(name: str, tokens: list[int], weight_sets: int | None, timer: Timer, layouts: Layouts
                 ) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Every graph of one preset timed (and traced): its case records and its traced kernels. ``weight_sets``
    None: as many as ``bench`` would take (by memory, at most 4)."""
    device = torch.device("cuda")
    cfg = get_preset(name)
    weight_sets = weight_sets or _weight_sets(cfg, True, None)
    layouts = fitted(layouts, cfg.weight_bytes(), weight_sets, torch.cuda.mem_get_info()[0])
    layer = MoELayer(cfg, device)
    copies = [[MoEWeights.random(cfg, device, seed=weight_seed(k)) for k in range(weight_sets)]
              for _ in range(layouts.copies)]
    records: list[dict[str, object]] = []
    kernels: list[dict[str, object]] = []
    for t in tokens:
        x = bench_input(cfg, t, device, layer.dtype)
        steps = {(strategy, c, k): graph_step(layer, copies[c], x, strategy)
                 for strategy in STRATEGIES for c, k in layouts.pairs}
        bursts = timer.measure_interleaved(steps, GRAPH_ROUNDS, min_burst=3)
        for (strategy, c, k), step in steps.items():
            samples = [s / weight_sets for b in bursts[(strategy, c, k)] for s in b[1:]]
            meta = {"preset": name, "tokens": t, "strategy": strategy, "mode": "graph", "weights_copy": c,
                    "capture": k, "weight_sets": weight_sets, "layers_per_replay": weight_sets,
                    "backend": layer.backend}
            records.append(meta | {"median_us": statistics.median(samples), "min_us": min(samples),
                                   "replays": len(samples), "timer": "cuda_events",
                                   "order": f"all graphs of the token count interleaved, {GRAPH_ROUNDS} rounds of "
                                            "bursts; each burst's first replay dropped"})
            if not layouts.trace:
                continue
            for i in range(3):
                step(i)
            raw = chrome_trace(lambda step=step: step(0), True, meta, record_shapes=False)
            kept = [{key: kernel[key] for key in ("name", "start_us", "dur_us", "stream", "grid", "block")}
                    for kernel in _kernels_from_trace(json.loads(raw))]
            kernels.append(meta | {"layers": weight_sets, "kernels": kept})
        del steps
    del copies, layer
    torch.cuda.empty_cache()
    return records, kernels


def gains_table(records: list[dict[str, object]]) -> str:
    """Per preset × tokens: the multi_stream gain of every (copy, capture) and the A/A spread."""
    times = {(r["preset"], r["tokens"], r["strategy"], r["weights_copy"], r["capture"]): float(r["median_us"])
             for r in records}
    lines = ["| preset | tokens | multi_stream gain per (copy, capture) | largest A/A difference, sequential / "
             "multi_stream |", "| --- | ---: | --- | --- |"]
    for preset, t in sorted({(p, t) for p, t, *_ in times}):
        pairs = sorted({(c, k) for p, tt, s, c, k in times if (p, tt, s) == (preset, t, "sequential")})
        per = {strategy: [times[(preset, t, strategy, c, k)] for c, k in pairs] for strategy in STRATEGIES}
        gains = [100 * (1 - ms / seq) for seq, ms in zip(per["sequential"], per["multi_stream"], strict=True)]
        spreads = [100 * (max(xs) / min(xs) - 1) for xs in per.values()]
        lines.append(f"| {preset} | {t} | " + " ".join(f"{g:+.1f} %" for g in gains)
                     + f" | {spreads[0]:.1f} % / {spreads[1]:.1f} % |")
    return "\n".join(lines)


def usage_error(args: argparse.Namespace) -> str | None:
    """Why the probe cannot run as asked (None when it can): no GPU, a count below 1, an unknown preset."""
    if not torch.cuda.is_available():
        return "the layout probe needs a CUDA/ROCm device"
    if min(args.weight_sets or 1, args.copies, args.captures, *args.tokens) < 1:
        return "--weight-sets, --copies, --captures and --tokens must be at least 1"
    return preset_error(args.presets)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.layout_probe", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--presets", nargs="+", default=["llama4_scout", "deepseek_v3", "qwen2_57b_a14b@tp8"])
    p.add_argument("--tokens", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--weight-sets", type=int,
                   help="weight sets per copy (each graph runs them all; default: as many as bench takes)")
    p.add_argument("--copies", type=int, default=2, help="copies of the weight sets (default 2)")
    p.add_argument("--captures", type=int, default=2, help="graph captures per copy and strategy (default 2)")
    p.add_argument("--no-trace", action="store_true", help="time only (no traced kernels)")
    args = p.parse_args(argv)
    error = usage_error(args)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    env = run_env(torch.device("cuda"), __doc__)
    timer = Timer(True, 0.12, 10, 300)
    current_stream(safe=True)  # a dedicated current stream, as the bench and vLLM
    records: list[dict[str, object]] = []
    kernels: list[dict[str, object]] = []
    try:
        for name in args.presets:
            more_records, more_kernels = probe_preset(name, args.tokens, args.weight_sets, timer,
                                                      Layouts(args.copies, args.captures, not args.no_trace))
            records += more_records
            kernels += more_kernels
            print(f"{name}: {len(more_records)} graphs timed" + ("" if args.no_trace else " and traced"), flush=True)
    finally:
        reset_current_stream()
    args.out.mkdir(parents=True, exist_ok=True)
    _write_json(args.out / "cases.json", records)
    if kernels:
        write_bytes_atomic(args.out / "kernels.json.gz", gzip.compress(json.dumps(kernels).encode(), compresslevel=9))
    _write_json(args.out / "env.json", env | {"nvidia_smi_after": _nvidia_smi()})
    print(gains_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
