"""The spacer probe's layer gains: multi_stream with and without a spin kernel ahead of the routing head.

Reads ``kernels_real.spacer_probe`` runs (one folder per preset, each with ``cases.json``; several runs pooled, a
point measured in two taken from both): per preset × tokens, the
multi_stream gain over sequential without a delay and with each measured ``router_delay_cycles``, the mean over
the graph captures (each capture's own sequential base: the captures' mean), and where the delay turns a
measured loss into a gain. Prints markdown (or ``--json``).

    python benchmarks/spacer_table.py [RUN ...] [--json]    # default: calls 39 and 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from simulator.errors import InputError, print_or_fail

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "calibration" / "measurements" / "h200" / "2026-12-04"
DEFAULT_RUNS = (MEASURED / "spacer_probe", MEASURED / "spacer_probe_call40")  # calls 39 (1/2/4 tokens), 40 (3-16)
ROUTED_FIRST = "routed first"


def load(run: Path) -> list[dict[str, Any]]:
    """Every record of the run's preset folders (or of ``run/cases.json`` itself)."""
    paths = sorted(run.glob("*/cases.json")) or ([run / "cases.json"] if (run / "cases.json").is_file() else [])
    if not paths:
        raise InputError(f"{run}: no cases.json (python -m kernels_real.spacer_probe writes one per run)")
    return [record for path in paths for record in json.loads(path.read_text())]


def points(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (preset, tokens): the mean sequential time and the gain of each multi_stream variant (fractions)."""
    by: dict[tuple[str, int], dict[tuple[str, str], list[float]]] = {}
    for r in records:
        key = (str(r["strategy"]), variant(r))
        by.setdefault((str(r["preset"]), int(r["tokens"])), {}).setdefault(key, []).append(float(r["median_us"]))
    out = []
    for (preset, tokens), times in sorted(by.items()):
        if ("sequential", "0") not in times or not any(s == "multi_stream" for s, _ in times):
            raise InputError(f"{preset} t{tokens}: no sequential or no multi_stream record to compare")
        seq = statistics.fmean(times[("sequential", "0")])
        gains = {v: 1 - statistics.fmean(t) / seq for (s, v), t in times.items() if s == "multi_stream"}
        out.append({"preset": preset, "tokens": tokens, "sequential_us": round(seq, 3),
                    "gains": {v: round(gains[v], 5) for v in sorted(gains, key=order)}})
    return out


def variant(record: dict[str, Any]) -> str:
    """A variant's key: its delay in cycles, or ``routed first`` (the other capture order, no delay)."""
    return ROUTED_FIRST if record.get("shared_first", True) is False else str(int(record["router_delay_cycles"]))


def order(key: str) -> tuple[bool, int]:
    """Delays in order, then the other capture order."""
    return (key == ROUTED_FIRST, int(key) if key != ROUTED_FIRST else 0)


def markdown(found: list[dict[str, Any]], runs: list[Path]) -> str:
    keys = sorted({k for p in found for k in p["gains"]}, key=order)
    where = ", ".join(f"`{r.relative_to(ROOT) if r.is_relative_to(ROOT) else r}`" for r in runs)
    lines = [f"Runs {where}: graph mode, multi_stream gain over sequential (mean over the graph captures); "
             "delay = `router_delay_cycles` (`torch.cuda._sleep` on the main stream after the fork, ahead of the "
             "routing head; 2000 cycles is about 1 µs on the H200). Not run on AMD hardware.", "",
             "| preset | tokens | " + " | ".join(label(k) for k in keys) + " |",
             "| --- | ---: |" + " ---: |" * len(keys)]
    for p in found:
        lines.append(f"| {p['preset']} | {p['tokens']} | "
                     + " | ".join(f"{100 * p['gains'][k]:+.1f} %" if k in p["gains"] else "–" for k in keys) + " |")
    losses = [p for p in found if p["gains"]["0"] < -0.005]
    turned = [p for p in losses if max(g for k, g in p["gains"].items() if k != "0") > 0.005]
    best = [max(g for k, g in p["gains"].items() if k != "0") - p["gains"]["0"] for p in found]
    lines += ["", f"multi_stream without a delay loses (more than 0.5 %) at {len(losses)} of {len(found)} points; a "
                  f"variant turns {len(turned)} of them into a gain (more than 0.5 %): "
              + (", ".join(f"{p['preset']} t{p['tokens']}" for p in turned) or "none") + ".",
              f"The best variant against none, over all points: median {100 * statistics.median(best):+.1f} points, "
              f"from {100 * min(best):+.1f} to {100 * max(best):+.1f}.", "",
              "As fixed policies (regret: the gain of the best of sequential and every multi_stream variant at the "
              "point minus the policy's, in points; mean / worst over the points):", ""]
    for name, key in [("always sequential", None), *((f"always multi_stream, {label(k)}", k) for k in keys)]:
        regrets = [best_gain(p) - (p["gains"][key] if key else 0.0) for p in found if key is None or key in p["gains"]]
        lines.append(f"- {name}: {100 * statistics.fmean(regrets):.2f} / {100 * max(regrets):.2f}")
    return "\n".join(lines)


def label(key: str) -> str:
    """A variant's column heading."""
    return "no delay" if key == "0" else key if key == ROUTED_FIRST else f"delay {key}"


def best_gain(point: dict[str, Any]) -> float:
    """The best measured gain at the point over sequential (0) and every multi_stream variant."""
    return max(0.0, *point["gains"].values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                    help="probe runs (default: calls 39 and 40)")
    ap.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = ap.parse_args(argv)

    def report() -> str:
        found = points([r for run in args.runs for r in load(run)])
        return json.dumps(found, indent=2) if args.json else markdown(found, args.runs)

    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
