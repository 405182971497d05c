"""The dispatch probe as a table: where a router's blocks land beside a shared GEMM, with and without a node ahead.

Reads ``calibration.microbench.dispatch_probe`` runs (``dispatch_probe.json.gz``). Per shared GEMM shape × router
(2 tokens): event-timed µs per weight set of the shared GEMM alone (S), the real cuBLAS router alone (Rc), their
sum, and the two forked as the layer forks them without (S|Rc) and with (S|~Rc) a spin ahead of the routing head;
then the instrumented stand-in (the router's grid, its weights streamed, each block's SM and global-timer times
written): the SMs its blocks ran on alone, forked, and forked after the spin, the most blocks one SM ran in the
forked graph, and a block's median time alone and forked (µs); where the run has them (call 49 on), also the
two forked with the routing head captured first (Rc|S, R|S: ``MoELayer(shared_first=False)``'s order).

    python benchmarks/dispatch_table.py [RUN] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

from simulator.errors import InputError, print_or_fail

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUN = ROOT / "calibration" / "measurements" / "h200" / "2026-12-04" / "dispatch_probe"


def load(run: Path) -> list[dict[str, Any]]:
    path = run / "dispatch_probe.json.gz"
    if not path.is_file():
        raise InputError(f"{path}: no such file (python -m calibration.microbench.dispatch_probe writes it)")
    try:
        return json.loads(gzip.decompress(path.read_bytes()))["records"]
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: not a dispatch probe output ({type(err).__name__}: {err})") from None


def _cell(graphs: dict[str, Any], name: str, key: str, fmt: str) -> str:
    """One figure of one graph, "–" where the run did not measure that graph (call 48 had no routed-first one)."""
    return format(graphs[name][key], fmt) if name in graphs else "–"


def markdown(records: list[dict[str, Any]]) -> str:
    stand_in = ("R", "S|R", "S|~R", "R|S")
    lines = ["| shared GEMM | router | S | Rc | S + Rc | S\\|Rc | S\\|~Rc | Rc\\|S | stand-in SMs: alone / S\\|R / "
             "S\\|~R / R\\|S | most per SM in S\\|R | block µs: alone / S\\|R / S\\|~R / R\\|S |",
             "| --- | --- |" + " ---: |" * 9]
    for r in records:
        g = r["graphs"]
        cells = [f"{g[k]['us']:.1f}" for k in ("S", "Rc")] + [f"{g['S']['us'] + g['Rc']['us']:.1f}"]
        cells += [_cell(g, k, "us", ".1f") for k in ("S|Rc", "S|~Rc", "Rc|S")]
        cells.append(" / ".join(_cell(g, k, "sms", ".0f") for k in stand_in))
        cells.append(f"{g['S|R']['max_per_sm']:.0f}")
        cells.append(" / ".join(_cell(g, k, "block_us", ".1f") for k in stand_in))
        lines.append(f"| {r['shared']} | {r['router']} | " + " | ".join(cells) + " |")
    worse = [r for r in records if r["graphs"]["S|Rc"]["us"] > r["graphs"]["S"]["us"] + r["graphs"]["Rc"]["us"]]
    spread = [r for r in records if r["graphs"]["S|~R"]["sms"] > r["graphs"]["S|R"]["sms"]]
    lines += ["", f"Forked without the spin slower than the two in sequence: {len(worse)} of {len(records)} cases; "
              f"the stand-in on more SMs after the spin than without: {len(spread)} of {len(records)}."]
    first = [r for r in records if "R|S" in r["graphs"]]
    if first:
        spread_first = [r for r in first if r["graphs"]["R|S"]["sms"] > r["graphs"]["S|R"]["sms"]]
        lines.append(f"Routing head captured first (R\\|S, no spin): the stand-in on more SMs than in S\\|R in "
                     f"{len(spread_first)} of {len(first)} cases.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", nargs="?", type=Path, default=DEFAULT_RUN, help="a dispatch_probe output folder")
    p.add_argument("--json", action="store_true", help="the records as JSON")
    args = p.parse_args(argv)
    return print_or_fail(lambda: json.dumps(load(args.run), indent=1) if args.json else markdown(load(args.run)))


if __name__ == "__main__":
    sys.exit(main())
