"""``python -m calibration.microbench --out DIR [--quick] [--budget-s N] [--only corun|grouped]``: measure, write
DIR/microbench.json (``--only corun``: env, ceilings, host costs and the co-run pairs, no solo shapes;
``--only grouped``: env, ceilings, host costs and the routed experts' grouped GEMMs alone, e.g. to remeasure them
in the layer's weight layout: ``moesim calibrate --solo-rerun`` takes them over a full run's)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.microbench import records, shapes, table
from calibration.microbench.budget import Budget

ROCM_NOTE = ("written against torch.cuda APIs that HIP builds of torch also provide; not run on ROCm here "
             "(torch._grouped_mm may be missing there: its shapes are then skipped with a note)")
STAGES = {"solo": 0.55, "corun": 0.85, "kernel-facts": 1.0}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m calibration.microbench", description=__doc__)
    ap.add_argument("--out", required=True, type=Path, help="folder for microbench.json")
    ap.add_argument("--quick", action="store_true", help="a tiny subset (smoke test)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="wall-clock budget; the rest is skipped")
    ap.add_argument("--grouped-ab", action="store_true",
                    help="with --only grouped: each grouped GEMM also in the [E, K, N] layout measured before "
                         "2026-12-04, right after the layer's (the two layouts compared on one machine start)")
    ap.add_argument("--only", choices=("corun", "grouped"), default=None,
                    help="measure only this stage (plus env, ceilings and host costs, which are fast)")
    args = ap.parse_args(argv)
    if args.budget_s <= 0:
        ap.error("--budget-s must be positive")
    if args.grouped_ab and args.only != "grouped":
        ap.error("--grouped-ab goes with --only grouped")
    if args.out.exists() and not args.out.is_dir():
        ap.error(f"--out {args.out} exists and is not a folder")
    return args


def gpu_or_reason() -> tuple[Any, str | None]:
    """(torch, None) where a CUDA/HIP device is usable, else (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, (f"torch {torch.__version__} sees no CUDA/ROCm device "
                      f"(cuda {torch.version.cuda}, hip {getattr(torch.version, 'hip', None)})")
    return torch, None


def _stage(name: str, fn: Callable[[], Any], default: Any, notes: list[str]) -> Any:
    """Run one measuring stage; a failure becomes a note (and a line on stderr) so the other stages still run."""
    try:
        return fn()
    except Exception as err:  # a broken stage must not lose the others' measurements
        msg = f"stage {name} failed: {type(err).__name__}: {str(err).splitlines()[0][:240] if str(err) else ''}"
        print(msg, file=sys.stderr)
        notes.append(msg)
        return default


def measure(torch: Any, quick: bool, budget: Budget, only: str | None = None,
            grouped_ab: bool = False) -> dict[str, Any]:
    from calibration.microbench import ceilings, corun, envinfo, host_costs, kernel_facts, solo

    dev = torch.device("cuda", torch.cuda.current_device())
    notes: list[str] = [ROCM_NOTE]
    env = envinfo.collect(torch, dev)
    l2 = env["l2_bytes"] or 50 << 20
    print(f"microbench: {env['gpu']}, torch {env['torch']}, budget {budget.total:.0f} s", file=sys.stderr)
    ceil = _stage("ceilings", lambda: ceilings.run(torch, dev, quick), {}, notes)
    host = _stage("host", lambda: host_costs.run(torch, dev, notes), {}, notes)
    solo_recs: list[dict[str, Any]] = []
    reps = 5 if quick else 7
    if only is None:
        budget.stage(STAGES["solo"])
        solo_recs = _stage("solo", lambda: solo.run(torch, shapes.solo_specs(quick), dev, l2, budget, reps, notes),
                           [], notes)
    elif only == "grouped":
        budget.stage(1.0)
        specs = shapes.grouped_solo_specs(quick, legacy_too=grouped_ab)
        solo_recs = _stage("solo", lambda: solo.run(torch, specs, dev, l2, budget, reps, notes), [], notes)
        notes.append("--only grouped: the grouped GEMM solo shapes alone; no other solo shape, co-run or kernel facts")
    else:
        notes.append(f"--only {only}: solo shapes and kernel facts not measured in this run")
    co: list[dict[str, Any]] = []
    if only != "grouped":
        budget.stage(STAGES["corun"] if only is None else 1.0)
        co = _stage("corun", lambda: corun.run(torch, shapes.corun_pairs(quick), dev, l2, budget,
                                               10 if quick else 15, notes), [], notes)
    if only is None:
        budget.stage(STAGES["kernel-facts"])
        _stage("kernel-facts", lambda: kernel_facts.run(torch, solo_recs, dev, budget, notes), None, notes)
    env["clocks_after"] = envinfo.clocks()
    notes += [f"solo: {solo.HOW}", f"corun: {corun.HOW}", f"kernel facts: {kernel_facts.HOW}",
              "solo median_us is the per-call period in a graph chain (kernel + graph node gap); subtract "
              "host.node_gap_us for a pure kernel duration, or compare kernel_us from the profiler",
              f"elapsed {budget.elapsed():.0f} s of a {budget.total:.0f} s budget", *budget.notes()]
    return records.document(env, ceil, solo_recs, co, host, notes)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch, why = gpu_or_reason()
    if torch is None:
        print(f"no GPU: {why}", file=sys.stderr)
        return 2
    budget = Budget(args.budget_s)
    doc = measure(torch, args.quick, budget, args.only, args.grouped_ab)
    path = args.out / "microbench.json"
    records.write_json_atomic(path, doc)
    print(table.summary(doc, str(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
