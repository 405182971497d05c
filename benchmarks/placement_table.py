"""The router GEMM beside a shared-expert GEMM, from ``calibration.microbench.placement_probe`` runs: per shared
GEMM shape (with the blocks its cuBLAS grid holds, one per SM) and router (fp32 and bf16), the medians of S, R
and S|R at one token count and the overlap 1 − (S|R) / (S + R): negative where the pair runs slower than in
sequence.

    PYTHONPATH=. python benchmarks/placement_table.py [--tokens 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

from simulator.errors import InputError

RUNS = {"fp32": Path("calibration/measurements/h200/2026-12-03/placement_probe/placement_probe_fp32.json.gz"),
        "bf16": Path("calibration/measurements/h200/2026-12-03/placement_probe/placement_probe_bf16.json.gz")}


def records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InputError(f"{path}: no such file (a placement_probe run)")
    return json.loads(gzip.decompress(path.read_bytes()))["records"]


def shared_blocks(record: dict[str, Any]) -> int | None:
    """Blocks of the shared GEMM's main kernel in the profiled ``S`` graph (the longest kernel)."""
    kernels = record["kernels"]
    rows = [dict(zip(kernels["fields"], row, strict=True)) for row in kernels["graphs"].get("S", [])]
    if not rows:
        return None
    longest = max(rows, key=lambda r: r["dur_us"])
    return math.prod(longest["grid"]) if longest.get("grid") else None


def overlap(med: dict[str, float]) -> float:
    return 1 - med["S|R"] / (med["S"] + med["R"])


def markdown(tokens: int) -> str:
    by_dtype = {dtype: {(r["shared"], r["router"]): r for r in records(path) if r["tokens"] == tokens}
                for dtype, path in RUNS.items()}
    lines = [f"{tokens} token(s); µs per step, medians of event-timed graph replays; overlap = 1 − (S|R) / (S + R).",
             "", "| shared GEMM (blocks) | router | S | R fp32 | S\\|R fp32 | overlap fp32 | R bf16 | S\\|R bf16 | "
             "overlap bf16 |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, fp32 in by_dtype["fp32"].items():
        bf16 = by_dtype["bf16"].get(key)
        m32 = fp32["median_us"]
        row = (f"| {key[0]} ({shared_blocks(fp32)}) | {key[1]} | {m32['S']:.1f} | {m32['R']:.1f} | {m32['S|R']:.1f} | "
               f"{100 * overlap(m32):+.0f} % |")
        if bf16 is None:
            row += " n/a | n/a | n/a |"
        else:
            m16 = bf16["median_us"]
            row += f" {m16['R']:.1f} | {m16['S|R']:.1f} | {100 * overlap(m16):+.0f} % |"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2, help="token count (the probe has 1, 2, 4; default 2)")
    args = ap.parse_args(argv)
    try:
        print(markdown(args.tokens))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
