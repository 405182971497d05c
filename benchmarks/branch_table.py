"""The branch probe's stamps as a table: when the routing branch starts beside a shared GEMM inside a replayed
graph, how long the routing head takes there, and the GEMM's own end.

Reads ``calibration.microbench.branch_probe`` runs (``branch_probe.json.gz``): per shared GEMM shape × router ×
token count, µs after each set's fork stamp (GPU global timer, no profiler), medians over replays × sets. Columns:
S alone (its end stamp), the routing head alone (R end − R start: the cast and the fp32 router GEMM), and in the
forked graph the branch's start, the head's time (R end − R start) as a multiple of its time alone, and S's end.
The shared GEMM's grid and blocks per SM are the placement probe's (same shapes, its S graphs), where it has the
shape: whether S leaves SMs free.

    python benchmarks/branch_table.py [RUN ...] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from simulator.errors import InputError, print_or_fail

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUN = ROOT / "calibration" / "measurements" / "h200" / "2026-12-04" / "branch_probe"
PROBE = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "placement_probe"
SM_COUNT = 132  # the probe's GPU (an H200)


def load(run: Path) -> dict[str, Any]:
    path = run / "branch_probe.json.gz"
    if not path.is_file():
        raise InputError(f"{path}: no such file (python -m calibration.microbench.branch_probe writes it)")
    return json.loads(gzip.decompress(path.read_bytes()))


def shared_blocks() -> dict[str, tuple[int, int]]:
    """Shared shape label → (blocks, blocks per SM) of its GEMM kernel, from the placement probe's S graphs."""
    from calibration.fit_latency import ROUTER_RUNS, blocks_per_sm, records, shared_gemm

    found: dict[str, tuple[int, int]] = {}
    for run in ROUTER_RUNS:
        path = PROBE / run
        if not path.is_file():
            continue
        for record in records(path):
            gemm = shared_gemm(record)
            if gemm is not None and record["shared"] not in found:
                found[record["shared"]] = (math.prod(gemm["grid"]), blocks_per_sm(record, gemm))
    return found


def rows(data: dict[str, Any], grids: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    out = []
    for r in data["records"]:
        alone, both = r["stamps_us"]["R"], r["stamps_us"]["S|R"]
        head_alone = alone["R end"] - alone["R start"]
        head_beside = both["R end"] - both["R start"]
        blocks, per_sm = grids.get(r["shared"], (None, None))
        out.append({"shared": r["shared"], "router": r["router"], "tokens": r["tokens"],
                    "shared_blocks": blocks, "shared_per_sm": per_sm,
                    "s_alone_us": r["stamps_us"]["S"]["S end"], "head_alone_us": round(head_alone, 3),
                    "branch_start_us": both["R start"], "head_beside_us": round(head_beside, 3),
                    "head_slowdown": round(head_beside / head_alone, 3), "s_end_beside_us": both["S end"]})
    return out


def markdown(found: list[dict[str, Any]], run: Path) -> str:
    holds_all = [r for r in found if r["shared_blocks"] == SM_COUNT and r["shared_per_sm"] == 1]
    free = [r for r in found if r not in holds_all]
    lines = [f"Run: `{run.relative_to(ROOT) if run.is_relative_to(ROOT) else run}`; µs after the fork stamp, "
             "medians over replays × weight sets; S's grid from the placement probe's S graphs. Not run on AMD "
             "hardware.", "",
             "| shared GEMM (blocks) | router | tokens | S alone | head alone | beside S: branch start | head | "
             "head / alone | S end |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in found:
        lines.append(f"| {r['shared']} ({r['shared_blocks'] or '?'}) | {r['router']} | {r['tokens']} | "
                     f"{r['s_alone_us']:.1f} | {r['head_alone_us']:.1f} | {r['branch_start_us']:.1f} | "
                     f"{r['head_beside_us']:.1f} | {r['head_slowdown']:.2f}× | {r['s_end_beside_us']:.1f} |")
    if free:
        starts = [r["branch_start_us"] for r in free]
        lines += ["", f"Beside a GEMM that leaves SMs free ({len(free)} cases): the branch starts "
                      f"{statistics.median(starts):.1f} µs after the fork (median; {min(starts):.1f}–"
                      f"{max(starts):.1f})."]
    if holds_all:
        lines.append(f"Beside a GEMM of {SM_COUNT} full-SM blocks ({len(holds_all)} cases): the branch starts at "
                     + ", ".join(f"{r['branch_start_us']:.1f} µs ({r['router']}; S ends at "
                                 f"{r['s_end_beside_us']:.1f})" for r in holds_all) + ".")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, default=[DEFAULT_RUN], help=f"probe run(s) (default {DEFAULT_RUN})")
    ap.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = ap.parse_args(argv)

    def report() -> str:
        grids = shared_blocks()
        found = {run: rows(load(run), grids) for run in args.runs}
        if args.json:
            return json.dumps({str(run): r for run, r in found.items()}, indent=2)
        return "\n\n".join(markdown(r, run) for run, r in found.items())

    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
