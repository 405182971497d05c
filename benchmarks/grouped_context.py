"""The layer's grouped GEMM after six kinds of kernel (``kernels_real.grouped_context_probe``), beside the
profile's solo time for it and the same kernel in the layer's own replayed graph.

Per preset × tokens of the probe: the gate_up grouped GEMM's median kernel time after each context (its own chain
as the microbench times it, a 256 MiB L2 flush, its input rows warmed, the layer's gather, a spin, a dense GEMM);
the profile's solo time for that GEMM with the probe's experts hit (the microbench's table, as the simulator costs
it); and, where the layer traces hold the point, the kernel's median time in the sequential layer's replayed graph
on the same weight set (set 0, the probe's weights). Not run on AMD hardware.

    PYTHONPATH=. python benchmarks/grouped_context.py --probe DIR [--traces DIR] [--profile NAME]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from calibration.layer_traces import is_grouped_gemm
from simulator.errors import InputError, print_or_fail
from simulator.profile import load_profile
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset

CONTEXTS = ("chain", "flush", "x_warm", "gather", "spin", "dense")


def load_probe(folder: Path) -> dict[str, Any]:
    path = folder / "grouped_context_probe.json"
    if not path.is_file():
        raise InputError(f"--probe {folder}: no grouped_context_probe.json there")
    return json.loads(path.read_text())


def profile_gate_up_us(profile: Any, preset: str, tokens: int, experts_hit: int) -> float:
    """The simulator's solo µs for the preset's gate_up grouped GEMM with ``experts_hit`` experts hit."""
    prog = moe_layer_program(get_preset(preset), tokens, "sequential", profile, mode="graph", iterations=1,
                             touched=float(experts_hit))
    return next(op.dur_us for op in prog.ops if op.op == "launch" and op.kernel == "grouped_mm_gate_up")


def layer_gate_up_us(traces: Path | None) -> dict[tuple[str, int], float]:
    """Per (preset, tokens): the gate_up grouped GEMM's median µs in the sequential layer traces, set 0's layers."""
    if traces is None:
        return {}
    path = traces / "kernels.json.gz"
    if not path.is_file():
        raise InputError(f"--traces {traces}: no kernels.json.gz there")
    cases_path = traces / "cases.json"
    cases = json.loads(cases_path.read_text()) if cases_path.is_file() else []
    cases = cases["cases"] if isinstance(cases, dict) else cases
    sets = {(c["preset"], c["tokens"]): int(c.get("weight_sets") or 1) for c in cases}
    out = {}
    for rec in json.loads(gzip.decompress(path.read_bytes())):
        if rec["strategy"] != "sequential":
            continue
        grouped = [k["dur_us"] for k in rec["kernels"] if is_grouped_gemm(k["name"])]
        layers, n_sets = int(rec["layers"]), sets.get((rec["preset"], rec["tokens"]), 1)
        if len(grouped) != 2 * layers:
            continue
        out[(rec["preset"], rec["tokens"])] = statistics.median(grouped[2 * i] for i in range(0, layers, n_sets))
    return out


def markdown(probe_dir: Path, traces: Path | None, profile_name: str) -> str:
    probe = load_probe(probe_dir)
    profile = load_profile(profile_name)
    layer = layer_gate_up_us(traces)
    env = probe.get("env", {})
    smi = env.get("nvidia_smi") or {}
    gpu = f"{env.get('device_name', '?')}, driver {smi.get('driver_version', '?')}, torch {env.get('torch', '?')}"
    lines = [f"Probe: `{probe_dir}` ({gpu}); solo time: profile {profile.describe()}; "
             + (f"layer: `{traces}` (sequential graphs, weight set 0). " if traces else "")
             + "Not run on AMD hardware.", "",
             "| preset | tokens | experts hit | " + " | ".join(f"after {c}" for c in CONTEXTS)
             + " | profile solo | in the layer |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in CONTEXTS) + " | ---: | ---: |"]
    for rec in probe["records"]:
        med = rec["median_us"]
        solo = profile_gate_up_us(profile, rec["preset"], rec["tokens"], rec["experts_hit"])
        in_layer = layer.get((rec["preset"], rec["tokens"]))
        lines.append(f"| {rec['preset']} | {rec['tokens']} | {rec['experts_hit']} | "
                     + " | ".join(f"{med[c]:.1f}" if c in med else "-" for c in CONTEXTS)
                     + f" | {solo:.1f} | {f'{in_layer:.1f}' if in_layer is not None else '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probe", type=Path, required=True, help="folder with grouped_context_probe.json")
    p.add_argument("--traces", type=Path, help="layer-trace folder (kernels.json.gz) of the same GPU")
    p.add_argument("--profile", default="h200", help="profile whose solo time to show (default: %(default)s)")
    args = p.parse_args(argv)
    return print_or_fail(lambda: markdown(args.probe, args.traces, args.profile))


if __name__ == "__main__":
    sys.exit(main())
