"""The layer's grouped GEMM after several kinds of kernel (``kernels_real.grouped_context_probe``), beside the
profile's solo time for it and the same kernel in the layer's own replayed graph.

Per preset × tokens of the probe: the gate_up grouped GEMM's median kernel time after each context the probe
recorded, in its order (its own chain as the microbench times it, a 256 MiB L2 flush, its input rows warmed, the
layer's gather, a spin, a dense GEMM, and since session 30 the same GEMM routed to other experts);
the profile's solo time for that GEMM with the probe's experts hit (the microbench's table, as the simulator costs
it); where the layer traces hold the point, the kernel's median time in the sequential layer's replayed graph on
the same weight set (set 0, the probe's weights); and, given a microbench run of the same machine start, its
per-call time for the same expert shape and token count (its own routing, so its experts hit are shown). Given
the placement check's ``rotation_check.json`` (session 30), a second table: the same call timed as the microbench
times it with its input rows at other addresses. Not run on AMD hardware.

    PYTHONPATH=. python benchmarks/grouped_context.py --probe DIR [--traces DIR] [--microbench FILE]
        [--placements FILE] [--profile NAME]
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


def _json(path: Path) -> Any:
    """A JSON document, gzipped where the name ends in .gz."""
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def load_probe(folder: Path) -> dict[str, Any]:
    """The probe's record, as written (``grouped_context_probe.json``) or gzipped for the repository."""
    for path in (folder / "grouped_context_probe.json", folder / "grouped_context_probe.json.gz"):
        if path.is_file():
            return _json(path)
    raise InputError(f"--probe {folder}: no grouped_context_probe.json(.gz) there")


def contexts(probe: dict[str, Any]) -> list[str]:
    """The contexts the probe recorded, in its order (a run before session 30 has six, later ones seven)."""
    return list(dict.fromkeys(c for rec in probe["records"] for c in rec["median_us"]))


def microbench_grouped(path: Path | None) -> dict[tuple[int, int, int, int], tuple[float, int, int]]:
    """Per (experts, K, N, tokens): the microbench's per-call µs of its grouped GEMM shape, its experts hit and
    the buffer rotations it cycled through (``calibration.microbench``'s solo records)."""
    if path is None:
        return {}
    if not path.is_file():
        raise InputError(f"--microbench {path}: no such file")
    try:
        doc = _json(path)
    except (OSError, ValueError) as err:
        raise InputError(f"--microbench {path}: not a microbench.json ({err})") from err
    out = {}
    for rec in doc.get("solo", []):
        shape = rec.get("shape")
        if isinstance(shape, dict) and shape.get("op") == "grouped_mm":
            key = (int(shape["E"]), int(shape["K"]), int(shape["N"]), int(shape["tokens"]))
            out[key] = (float(rec["median_us"]), sum(1 for c in shape["counts"] if c), int(rec.get("rotations", 1)))
    return out


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


def placements_markdown(path: Path) -> str:
    """The placement check's table: per token count, the call's per-call µs with the layer's rows, with random rows,
    and over the 16 copies of the layer's rows at other addresses (min / median / mean / max)."""
    if not path.is_file():
        raise InputError(f"--placements {path}: no such file")
    doc = json.loads(path.read_text())
    per_call = doc.get("per_call_us", {})
    tokens = sorted({int(k.split()[0][1:]) for k in per_call})
    lines = [f"Placement check: `{path}` ({doc.get('env', {}).get('device_name', '?')}); Llama-4-Scout's gate_up "
             "grouped GEMM, the layer's call, per-call µs as the microbench times a solo shape. Not run on AMD "
             "hardware.", "",
             "| tokens | layer's rows | random rows | random weights | rows copied elsewhere "
             "(min / median / mean / max of 16) |", "| ---: | ---: | ---: | ---: | --- |"]
    for t in tokens:
        spread = [r["per_call_us"] for r in per_call.get(f"t{t} placements", [])]
        cells = (f"{min(spread):.1f} / {statistics.median(spread):.1f} / {statistics.fmean(spread):.1f} / "
                 f"{max(spread):.1f}" if spread else "-")
        lines.append(f"| {t} | {per_call.get(f't{t} layer', float('nan')):.1f} | "
                     f"{per_call.get(f't{t} randn_x', float('nan')):.1f} | "
                     f"{per_call.get(f't{t} randn_w', float('nan')):.1f} | {cells} |")
    return "\n".join(lines)


def markdown(probe_dir: Path, traces: Path | None, profile_name: str, microbench: Path | None = None) -> str:
    probe = load_probe(probe_dir)
    profile = load_profile(profile_name)
    layer = layer_gate_up_us(traces)
    bench = microbench_grouped(microbench)
    names = contexts(probe)
    env = probe.get("env", {})
    smi = env.get("nvidia_smi") or {}
    gpu = f"{env.get('device_name', '?')}, driver {smi.get('driver_version', '?')}, torch {env.get('torch', '?')}"
    lines = [f"Probe: `{probe_dir}` ({gpu}); solo time: profile {profile.describe()}; "
             + (f"layer: `{traces}` (sequential graphs, weight set 0). " if traces else "")
             + (f"microbench: `{microbench}` (per-call µs of its chain, its experts hit, buffer rotations). "
                if microbench else "")
             + "Not run on AMD hardware.", "",
             "| preset | tokens | experts hit | " + " | ".join(f"after {c}" for c in names)
             + " | profile solo | in the layer |" + (" microbench (hit, rotations) |" if microbench else ""),
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in names) + " | ---: | ---: |"
             + (" ---: |" if microbench else "")]
    for rec in probe["records"]:
        med = rec["median_us"]
        solo = profile_gate_up_us(profile, rec["preset"], rec["tokens"], rec["experts_hit"])
        in_layer = layer.get((rec["preset"], rec["tokens"]))
        row = (f"| {rec['preset']} | {rec['tokens']} | {rec['experts_hit']} | "
               + " | ".join(f"{med[c]:.1f}" if c in med else "-" for c in names)
               + f" | {solo:.1f} | {f'{in_layer:.1f}' if in_layer is not None else '-'} |")
        if microbench:
            mb = bench.get((get_preset(rec["preset"]).n_experts, int(rec["K"]), int(rec["N"]), int(rec["tokens"])))
            row += f" {mb[0]:.1f} ({mb[1]}, {mb[2]}) |" if mb else " - |"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probe", type=Path, required=True, help="folder with grouped_context_probe.json")
    p.add_argument("--traces", type=Path, help="layer-trace folder (kernels.json.gz) of the same GPU")
    p.add_argument("--microbench", type=Path,
                   help="microbench.json(.gz) of the same machine start (calibration.microbench --only grouped)")
    p.add_argument("--placements", type=Path,
                   help="the placement check's rotation_check.json: a second table, the call with its rows elsewhere")
    p.add_argument("--profile", default="h200", help="profile whose solo time to show (default: %(default)s)")
    args = p.parse_args(argv)

    def report() -> str:
        text = markdown(args.probe, args.traces, args.profile, args.microbench)
        return text + ("\n\n" + placements_markdown(args.placements) if args.placements else "")
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
