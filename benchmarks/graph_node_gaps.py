"""How long a replayed CUDA graph's stream waits around its memset nodes, against kernel-to-kernel gaps.

Per bench run, every graph trace (``traces/*_graph.json.gz``) is read stream by stream in start order, and each
gap between the end of one GPU op and the start of the next on the same stream is put in one class: kernel →
kernel, kernel → memset (the gap *before* a memset node), memset → kernel (the gap *after* it, split by the
kind of kernel that follows). Medians and p10/p90 in µs; profiled replays, so every gap carries the profiler's
per-node cost (compare the kernel → kernel row, not the profile's unprofiled ``node_gap_us``).

    PYTHONPATH=. python benchmarks/graph_node_gaps.py [RUN ...]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from simulator.errors import InputError, print_or_fail

MEASUREMENTS = Path(__file__).resolve().parents[1] / "calibration" / "measurements" / "h200"
DEFAULT_RUNS = (MEASUREMENTS / "2026-12-02" / "kernels_real6", MEASUREMENTS / "2026-12-03" / "layer_traces_heldout",
                MEASUREMENTS / "2026-12-03" / "layer_traces_heldout2")
OPS = ("kernel", "gpu_memset", "gpu_memcpy")


def next_kind(name: str) -> str:
    """The kind of kernel a memset node hands over to: a tensor-core or fp32 GEMM, or another kernel."""
    low = name.lower()
    return "GEMM" if any(tag in low for tag in ("nvjet", "xmma", "gemm", "cutlass")) else "other kernel"


def gaps(trace: Path) -> dict[str, list[float]]:
    """Gap classes → gaps (µs) of one graph trace."""
    events = [e for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in OPS]
    streams: dict[object, list[dict]] = defaultdict(list)
    for e in events:
        streams[(e.get("args") or {}).get("stream")].append(e)
    out: dict[str, list[float]] = defaultdict(list)
    for ops in streams.values():
        ops.sort(key=lambda e: e["ts"])
        for a, b in itertools.pairwise(ops):
            gap = b["ts"] - (a["ts"] + a["dur"])
            if a["cat"] == "kernel" and b["cat"] == "kernel":
                out["kernel → kernel"].append(gap)
            elif a["cat"] == "kernel" and b["cat"] == "gpu_memset":
                out["kernel → memset"].append(gap)
            elif a["cat"] == "gpu_memset" and b["cat"] == "kernel":
                out[f"memset → {next_kind(b['name'])}"].append(gap)
    return out


def markdown(runs: list[Path]) -> str:
    rows = []
    for run in runs:
        traces = sorted((run / "traces").glob("*_graph.json.gz"))
        if not traces:
            raise InputError(f"{run}/traces: no *_graph.json.gz trace")
        pooled: dict[str, list[float]] = defaultdict(list)
        presets: set[str] = set()
        for trace in traces:
            found = gaps(trace)
            if "kernel → memset" in found:
                presets.add(trace.name.split("_t")[0])
            for key, values in found.items():
                pooled[key] += values
        for key in ("kernel → kernel", "kernel → memset", "memset → GEMM", "memset → other kernel"):
            values = sorted(pooled.get(key, []))
            if values:
                named = ", ".join(sorted(presets)) if key.startswith("memset") else ""
                rows.append(f"| {run.parent.name}/{run.name} | {key} | {len(values)} | "
                            f"{statistics.median(values):.2f} | {values[len(values) // 10]:.2f} | "
                            f"{values[9 * len(values) // 10]:.2f} | {named} |")
    return "\n".join(["| run | gap | gaps | median µs | p10 | p90 | presets with memset nodes |",
                      "| --- | --- | ---: | ---: | ---: | ---: | --- |", *rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS), help="bench runs with graph traces")
    args = ap.parse_args(argv)
    return print_or_fail(lambda: markdown(args.runs))


if __name__ == "__main__":
    sys.exit(main())
