"""How the trace what-if scales with the trace: time and peak memory per size, next to HolisticTraceAnalysis's load.

    python benchmarks/trace_scale.py [--mb 30 100 300 1000] [--template T.json.gz] [--no-hta] [--launch graph]
    python benchmarks/trace_scale.py --template tests/data/kineto/serving_cpu_sequential.json.gz --with-kernels \
        --select "--aux-module DeepseekV2MoE/DeepseekV2MLP"      # a with_stack (vLLM-like) trace

Builds each trace from a real one (default: kernels_real8's DeepSeek-V3 16-token sequential eager trace,
H200) by repeating its events back to back (timestamps shifted by the copy's span plus 50 µs, correlation and
flow ids shifted so they stay unique; ``moesim_layers_per_trace`` scaled), then runs ``moesim whatif trace
--aux-region moe.shared_experts`` on it in a fresh process and, unless ``--no-hta``, HTA's
``TraceAnalysis`` load of the same file in another: wall seconds and peak RSS of each process, and the
what-if's µs per trace event (the figure that must stay flat for the cost to be linear). The machine's load
average is printed with each row: on a shared machine, read the times with it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = (ROOT / "calibration/measurements/h200/2026-12-02/kernels_real8/traces"
            / "deepseek_v3_t16_sequential_eager.json.gz")
_ID_ARGS = ("correlation", "External id", "wait_on_cuda_event_record_corr_id")

WHATIF = """
import resource, sys, time
from simulator.cli.main import main
t = time.perf_counter()
rc = main(sys.argv[1:])
print(f"{time.perf_counter() - t:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {rc}",
      file=sys.stderr)
"""

HTA = """
import resource, sys, time, warnings
warnings.simplefilter("ignore")
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
print(f"{time.perf_counter() - t:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} 0",
      file=sys.stderr)
"""


def build(template: Path, out: Path, target_bytes: int, with_kernels: bool = False) -> tuple[int, int]:
    """Write copies of ``template``'s events to ``out`` until it holds ``target_bytes``; (bytes, events)."""
    opener = gzip.open if template.suffix == ".gz" else open
    with opener(template, "rb") as f:
        doc = json.load(f)
    if with_kernels:
        sys.path.insert(0, str(ROOT))
        from tests.data.kineto.synth import with_kernels as add_kernels

        doc = add_kernels(doc)
    events: list[dict[str, Any]] = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e]
    start = min(e["ts"] for e in timed)
    period = max(e["ts"] + e.get("dur", 0) for e in timed) - start + 50.0
    ids = [e.get("args", {}).get(k) for e in events for k in _ID_ARGS] + [e.get("id") for e in events]
    id_step = max(i for i in ids if isinstance(i, int)) + 1
    lines = [json.dumps(e) for e in events]
    per_copy = sum(len(line) + 2 for line in lines)
    copies = max(1, round(target_bytes / per_copy))
    layers = int(doc.get("moesim_layers_per_trace", 1))
    doc["moesim_layers_per_trace"] = layers * copies
    written = 0
    with open(out, "w") as f:
        f.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        for k in range(copies):
            for n, e in enumerate(events):
                if k:
                    e = _shift(e, k * period, k * id_step)
                    line = json.dumps(e)
                else:
                    line = lines[n]
                f.write(("" if k == n == 0 else ",\n") + line)
                written += 1
        f.write('\n]}\n')
        return f.tell(), written


def _shift(event: dict[str, Any], dt: float, did: int) -> dict[str, Any]:
    e = dict(event)
    if "ts" in e:
        e["ts"] = e["ts"] + dt
    if isinstance(e.get("id"), int):
        e["id"] += did
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in _ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] += did
        e["args"] = args
    return e


def timed(code: str, *argv: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of ``code`` run in a fresh interpreter with ``argv``."""
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    try:
        wall, rss, rc = last.split()
    except ValueError:
        raise SystemExit(f"run failed: {proc.stderr[-2000:]}") from None
    if rc != "0":
        raise SystemExit(f"run failed (exit {rc}): {proc.stderr[-2000:]}")
    return float(wall), float(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[30, 100, 300, 1000], help="trace sizes (MB)")
    parser.add_argument("--template", type=Path, default=TEMPLATE, help="real trace to repeat")
    parser.add_argument("--with-kernels", action="store_true",
                        help="the template is a CPU-profiled trace: add kernels first (tests' synth.with_kernels)")
    parser.add_argument("--select", default="--aux-region moe.shared_experts",
                        help="what to move (default: --aux-region moe.shared_experts)")
    parser.add_argument("--launch", choices=("as-traced", "graph"), default="graph")
    parser.add_argument("--no-hta", action="store_true", help="skip HTA's load")
    parser.add_argument("--keep", type=Path, help="build the traces in this folder (kept) instead of a temporary one")
    args = parser.parse_args()
    print(f"template {args.template.name}; what-if: moesim whatif trace T {args.select} --launch {args.launch} "
          f"--json; {os.cpu_count()} CPUs")
    print(f"{'MB':>7} {'events':>10} {'whatif s':>9} {'µs/event':>9} {'RSS MB':>7} {'HTA s':>7} {'HTA MB':>7} "
          f"{'load':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for mb in args.mb:
            sub = folder / f"{mb:g}mb"
            sub.mkdir(exist_ok=True)
            path = sub / "rank-0.json"
            size, events = build(args.template, path, int(mb * 1e6), args.with_kernels)
            wall, rss = timed(WHATIF, "whatif", "trace", str(path), *args.select.split(), "--launch", args.launch,
                              "--json")
            hta = ("-", "-") if args.no_hta else tuple(f"{v:.1f}" if i == 0 else f"{v:.0f}"
                                                       for i, v in enumerate(timed(HTA, str(sub))))
            print(f"{size / 1e6:7.0f} {events:10d} {wall:9.1f} {wall / events * 1e6:9.2f} {rss:7.0f} {hta[0]:>7} "
                  f"{hta[1]:>7} {os.getloadavg()[0]:5.2f}", flush=True)
            if not args.keep:
                path.unlink()
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"total {time.perf_counter() - t0:.0f} s")
    sys.exit(rc)
