"""``moesim calibrate --out simulator/profiles/NAME.json [--from-measurements DIR]``: measure (GPU) and fit a
profile, or refit one from stored raw measurements without a GPU.

A sub-command the calibration package adds to ``moesim`` through the ``moesim.commands`` entry point
(``pyproject.toml``): the simulator never imports this package. Like the simulator's own sub-command modules,
it imports only ``argparse`` and light ``simulator`` modules at module level, so ``moesim --help`` stays fast."""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
from pathlib import Path

from simulator.cli.common import number_in
from simulator.errors import InputError
from simulator.outputs import check_outputs, dumps, write_text_atomic, written


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure this GPU and fit a profile (or refit from stored measurements)",
        description="Run the GPU microbenchmarks (python -m calibration.microbench; needs a CUDA/ROCm GPU) into a "
                    "measurements folder, then fit a calibrated profile: ceilings, host API costs, measured solo "
                    "tables and per-family kernel cost parameters, the sharing model (three forms compared on "
                    "co-run pairs) and, when the folder holds kernels_real's cases.json, on its calibration split "
                    "only: per-op families from the layer traces, the sharing model's layer term and the eager "
                    "host-cost scale. "
                    "--from-measurements refits from a stored folder without a GPU.")
    p.add_argument("--out", required=True, type=Path, help="profile to write, e.g. simulator/profiles/h200.json")
    p.add_argument("--from-measurements", metavar="DIR", type=Path,
                   help="fit from this folder instead of measuring: microbench[/]microbench.json (solo shapes, "
                        "host costs), optionally microbench_corun/microbench.json (co-run records, preferred), "
                        "kernels_real[/]cases.json and kernels_real_eager2/ (newest eager cases)")
    p.add_argument("--decode", metavar="DIR", type=Path,
                   help="also fit from a folder of decode-regime measurements (graph_corun/ from python -m "
                        "calibration.microbench.graph_corun, bench runs of the rank variants): the graph fork/join "
                        "cost and the sharing form from the co-runs inside CUDA graphs (no layer-level gain in "
                        "the fit), and the regret of the model's decisions on those runs")
    p.add_argument("--solo-rerun", metavar="FILE", type=Path,
                   help="a later microbench.json (python -m calibration.microbench --only grouped) whose solo "
                        "records replace those of the same ops in --from-measurements' (e.g. the grouped GEMMs "
                        "remeasured in the layer's weight layout)")
    p.add_argument("--eager-host", metavar="DIR", type=Path,
                   help="a bench run with profiler-free host timings of its eager cases (python -m kernels_real.bench "
                        "--modes eager --interleave-eager --host-costs): eager host costs per torch op measured there "
                        "(calibration split) instead of the microbench figures times a scale fitted to eager layer "
                        "times; its eager cases are the ones moesim validate checks")
    p.add_argument("--replay-lengths", metavar="RUN", type=Path,
                   help="a replay-length run of this GPU (python -m kernels_real.replay_length_probe): what a "
                        "multi-stream graph replay loses once, at its first fork (host.graph_first_fork_us)")
    p.add_argument("--raw", metavar="DIR", type=Path,
                   help="where the microbenchmarks write when measuring (default calibration/measurements/NAME/DATE)")
    p.add_argument("--name", help="profile name (default: the --out file's stem)")
    p.add_argument("--quick", action="store_true", help="microbenchmarks: a small smoke subset")
    p.add_argument("--budget-s", type=number_in(1, 1e6), default=240.0, help="microbenchmarks: wall-clock budget (s)")
    p.add_argument("--holdout-presets", nargs="*", help="presets kept out of the layer-level fit "
                                                        "(default deepseek_v2_lite)")
    p.add_argument("--holdout-tokens", nargs="*", type=int, help="token counts kept out (default 2 32 512)")
    p.add_argument("--json", action="store_true", help="print the fitted profile as JSON")
    p.set_defaults(handler=run)


def _measure(raw: Path, quick: bool, budget_s: float) -> None:
    from calibration.microbench.__main__ import gpu_or_reason

    torch, why = gpu_or_reason()
    if torch is None:
        raise InputError(f"calibrate needs a CUDA/ROCm GPU ({why}); use --from-measurements DIR to refit")
    cmd = [sys.executable, "-m", "calibration.microbench", "--out", str(raw), "--budget-s", str(budget_s)]
    if quick:
        cmd.append("--quick")
    done = subprocess.run(cmd, check=False)
    if done.returncode != 0:
        raise InputError(f"the microbenchmarks failed (exit {done.returncode}): {' '.join(cmd)}")


def run(args: argparse.Namespace) -> int:
    from calibration.fit import fit_profile
    from simulator.validation import DEFAULT_HOLDOUT_PRESETS, DEFAULT_HOLDOUT_TOKENS, find_file
    from simulator.workloads.presets import get_preset

    out: Path = args.out
    if out.suffix != ".json":
        raise InputError(f"--out {out}: a profile is a .json file")
    folder = args.from_measurements
    if folder is not None and not folder.is_dir():
        raise InputError(f"--from-measurements {folder}: no such folder")
    if args.decode is not None and not args.decode.is_dir():
        raise InputError(f"--decode {args.decode}: no such folder")
    if args.eager_host is not None and not find_file(args.eager_host, "cases.json", "kernels_real").is_file():
        raise InputError(f"--eager-host {args.eager_host}: no cases.json there")
    if args.solo_rerun is not None and not args.solo_rerun.is_file():
        raise InputError(f"--solo-rerun {args.solo_rerun}: no such file")
    if args.replay_lengths is not None:
        from calibration.fit_replay import replay_length_file

        replay_length_file(args.replay_lengths)  # one line where the run is missing, before any fitting
    check_outputs({"--out": out}, folder.rglob("*.json") if folder is not None else ())
    name = args.name or out.stem
    presets = DEFAULT_HOLDOUT_PRESETS if args.holdout_presets is None else tuple(args.holdout_presets)
    for p in presets:
        get_preset(p)
    tokens = DEFAULT_HOLDOUT_TOKENS if args.holdout_tokens is None else tuple(args.holdout_tokens)
    if folder is None:
        folder = args.raw or Path("calibration/measurements") / name / dt.date.today().isoformat()
        _measure(folder, args.quick, args.budget_s)
    profile = fit_profile(folder, name, presets, tokens,
                          progress=lambda msg: print(f"calibrate: {msg}", file=sys.stderr, flush=True),
                          decode=args.decode, solo_rerun=args.solo_rerun, eager_host=args.eager_host,
                          replay_lengths=args.replay_lengths)
    text = profile.model_dump_json(indent=2, exclude_none=True) + "\n"
    write_text_atomic(out, text)
    if args.json:
        print(dumps(profile.model_dump(exclude_none=True)))
        return 0
    print(written("profile", out, profile.describe()))
    print(f"  ceilings: HBM {profile.ceilings.hbm_GBps.value:.0f} GB/s, bf16 {profile.ceilings.bf16_tflops.value:.0f} "
          f"TFLOP/s (measured)")
    for fam, res in profile.fit.get("kernel_families", {}).items():
        print(f"  {fam}: {res.get('n')} shapes, median |residual| {res.get('median_abs', 0):.1%}, "
              f"p90 {res.get('p90_abs', 0):.1%}")
    print(f"  sharing: {profile.interference.form} {profile.interference.params} — {profile.interference.source}")
    if profile.host.graph_join_us is not None:
        print(f"  graph fork/join: {profile.host.graph_join_us.value:.2f} µs ({profile.host.graph_join_us.source})")
    for line in profile.fit.get("decisions", {}).get("verdict", []):
        print(f"  decisions: {line}")
    for line in profile.fit.get("whatif_decisions", {}).get("verdict", []):
        print(f"  decisions of the trace what-if: {line}")
    layer = profile.fit.get("layer")
    if layer and "eager_cases" in layer:
        report = layer["eager_host"]
        print(f"  eager host costs: {report['ops']} torch ops measured in {layer['eager_cases']} ({report['cases']} "
              f"calls, {len(report['unmatched'])} cases unmatched; held out: presets {layer['holdout_presets']}, "
              f"tokens {layer['holdout_tokens']})")
        idle = profile.host.idle_launch_us
        if idle is not None:
            print(f"  launch onto an idle stream: +{idle.value:.2f} µs ({idle.source})")
    elif layer:
        print(f"  eager host scale × {layer['host_scale']} ({layer['calibration_cases']} calibration cases; held out: "
              f"presets {layer['holdout_presets']}, tokens {layer['holdout_tokens']})")
    return 0
