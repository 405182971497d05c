"""The branch probe's stamps as a table: when the routing branch starts beside a shared GEMM inside a replayed
graph, how long the routing head takes there, and the GEMM's own end.

Reads ``calibration.microbench.branch_probe`` runs (``branch_probe.json.gz``): per shared GEMM shape × router ×
token count, µs after each set's fork stamp (GPU global timer, no profiler), medians over replays × sets. Columns:
S alone (its end stamp), the routing head alone (R end − R start: the cast and the fp32 router GEMM), and in the
forked graph the branch's start, the head's time (R end − R start) as a multiple of its time alone, S's end and
the graph's end, beside the placement probe's event-timed S|R graph of the same case (no profiler either; another
device call). The shared GEMM's grid and blocks per SM are the placement probe's (same shapes, its S graphs):
whether S leaves SMs free.

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
MEASURED = ROOT / "calibration" / "measurements" / "h200" / "2026-12-04"
DEFAULT_RUN = MEASURED / "branch_probe_call37" / "run1"  # call 37: stamped and unstamped graphs in one process
DEFAULT_RUNS = (DEFAULT_RUN, MEASURED / "branch_probe_call37" / "run2", MEASURED / "branch_probe")
PROBE = ROOT / "calibration" / "measurements" / "h200" / "2026-12-03" / "placement_probe"
SM_COUNT = 132  # the probe's GPU (an H200)


def load(run: Path) -> dict[str, Any]:
    path = run / "branch_probe.json.gz"
    if not path.is_file():
        raise InputError(f"{path}: no such file (python -m calibration.microbench.branch_probe writes it)")
    return json.loads(gzip.decompress(path.read_bytes()))


def probe_records() -> list[dict[str, Any]]:
    """The placement probe's fp32 router records (calls 20-21 and 34), in run order."""
    from calibration.fit_latency import ROUTER_RUNS, records

    return [r for run in ROUTER_RUNS if (PROBE / run).is_file() for r in records(PROBE / run)
            if r.get("router_dtype", "float32") == "float32"]


def shared_blocks() -> dict[str, tuple[int, int]]:
    """Shared shape label → (blocks, blocks per SM) of its GEMM kernel, from the placement probe's S graphs."""
    from calibration.fit_latency import blocks_per_sm, shared_gemm

    found: dict[str, tuple[int, int]] = {}
    for record in probe_records():
        gemm = shared_gemm(record)
        if gemm is not None and record["shared"] not in found:
            found[record["shared"]] = (math.prod(gemm["grid"]), blocks_per_sm(record, gemm))
    return found


def probe_forked_us() -> dict[tuple[str, str, int], float]:
    """(shared, router, tokens) → the placement probe's event-timed S|R graph, µs per set (no profiler; its
    first run that has the case)."""
    found: dict[tuple[str, str, int], float] = {}
    for record in probe_records():
        found.setdefault((record["shared"], record["router"], record["tokens"]), record["median_us"]["S|R"])
    return found


def rows(data: dict[str, Any], grids: dict[str, tuple[int, int]],
         probe: dict[tuple[str, str, int], float] | None = None) -> list[dict[str, Any]]:
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
                    "head_slowdown": round(head_beside / head_alone, 3), "s_end_beside_us": both["S end"],
                    "forked_end_us": round(max(both["R end"], both["S end"]), 3),
                    "unstamped_forked_us": r.get("events_us", {}).get("S|R"),
                    "probe_forked_us": (probe or {}).get((r["shared"], r["router"], r["tokens"]))})
    return out


def apart(found: list[dict[str, Any]], key: str, label: str) -> str | None:
    """One line: how far the stamped graph's end lies from ``key`` (an unstamped S|R time), and where > 25 %."""
    paired = [r for r in found if r[key]]
    if not paired:
        return None
    gaps = [r["forked_end_us"] / r[key] - 1 for r in paired]
    far = [(r, g) for r, g in zip(paired, gaps, strict=True) if abs(g) > 0.25]
    median = 100 * statistics.median(map(abs, gaps))
    return (f"Stamped graph's end vs {label}: {len(paired)} cases, median {median:.0f}% apart; more than 25% apart "
            f"in {len(far)}"
            + (": " + ", ".join(f"{r['shared']} with {r['router']}'s router ({r['forked_end_us']:.1f} vs "
                                f"{r[key]:.1f} µs)" for r, _ in far) if far else "") + ".")


def markdown(found: list[dict[str, Any]], run: Path, table: bool = True) -> str:
    holds_all = [r for r in found if r["shared_blocks"] == SM_COUNT and r["shared_per_sm"] == 1]
    free = [r for r in found if r not in holds_all]
    where = run.relative_to(ROOT) if run.is_relative_to(ROOT) else run
    lines = [f"Run `{where}`: µs after the fork stamp, medians over replays × weight sets. Not run on AMD hardware."]
    if table:
        lines += ["", "| shared GEMM (blocks) | router | tokens | S alone | head alone | beside S: branch start | "
                      "head | head / alone | S end | graph's end | same process, no stamps: S\\|R | placement "
                      "probe (calls 20-21, 34): S\\|R |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in found:
            cells = [f"{r[k]:.1f}" if r[k] is not None else "–" for k in ("unstamped_forked_us", "probe_forked_us")]
            lines.append(f"| {r['shared']} ({r['shared_blocks'] or '?'}) | {r['router']} | {r['tokens']} | "
                         f"{r['s_alone_us']:.1f} | {r['head_alone_us']:.1f} | {r['branch_start_us']:.1f} | "
                         f"{r['head_beside_us']:.1f} | {r['head_slowdown']:.2f}× | {r['s_end_beside_us']:.1f} | "
                         f"{r['forked_end_us']:.1f} | {cells[0]} | {cells[1]} |")
        lines.append("")
    if free:
        starts = [r["branch_start_us"] for r in free]
        lines.append(f"Beside a GEMM that leaves SMs free ({len(free)} cases): the stamp that opens the routing branch "
                     f"runs {statistics.median(starts):.1f} µs after the fork (median; {min(starts):.1f}–"
                     f"{max(starts):.1f}).")
    if holds_all:
        lines.append(f"Beside a GEMM of {SM_COUNT} full-SM blocks ({len(holds_all)} cases): at "
                     + ", ".join(f"{r['branch_start_us']:.1f} µs ({r['router']}; S ends at "
                                 f"{r['s_end_beside_us']:.1f})" for r in holds_all) + ".")
    for line in (apart(found, "unstamped_forked_us", "the same graph without stamps, timed in the same process"),
                 apart(found, "probe_forked_us", "the placement probe's S|R (earlier calls, no stamps)")):
        if line:
            lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="probe run(s) (default: call 37's two runs, then call 36's); the first is tabulated")
    ap.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = ap.parse_args(argv)

    def report() -> str:
        grids, probe = shared_blocks(), probe_forked_us()
        found = {run: rows(load(run), grids, probe) for run in args.runs}
        if args.json:
            return json.dumps({str(run): r for run, r in found.items()}, indent=2)
        return "\n\n".join(markdown(r, run, table=i == 0) for i, (run, r) in enumerate(found.items()))

    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
