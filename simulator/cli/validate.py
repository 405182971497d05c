"""``moesim validate [--profile P] [--json] [--html F]``: the simulator against kernels_real's measurements."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.errors import InputError
from simulator.outputs import check_outputs, dumps, invocation, written


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "validate", help="compare simulated MoE layer times with measured ones",
        description="Simulate every measured kernels_real case (preset × tokens × strategy × mode) with the MoE "
                    "workload builder and a profile, and compare with cases.json: relative errors on the cases "
                    "held out of the profile's fit, per mode, and whether the sign of the multi_stream gain is "
                    "right. Targets: graph median |error| ≤ 2%, p90 ≤ 5%, sign right where |gain| > 1%; eager "
                    "median ≤ 5%, p90 ≤ 10%, sign right where |gain| > 5%.")
    p.add_argument("--profile", default="h200", help="profile name or path (default h200)")
    p.add_argument("--measurements", metavar="DIR", type=Path,
                   help="folder with cases.json (default: the one the profile was fitted from)")
    p.add_argument("--holdout-presets", nargs="*", help="override the held-out presets recorded in the profile")
    p.add_argument("--holdout-tokens", nargs="*", type=int, help="override the held-out token counts")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--markdown", action="store_true",
                   help="print the figure tables as markdown (the generated blocks of calibration/VALIDATION.md)")
    p.add_argument("--html", type=Path,
                   help="write the predicted-vs-measured scatter and per-preset errors (offline HTML)")
    p.add_argument("--strict", action="store_true", help="exit code 1 when a target is missed")
    p.set_defaults(handler=run)


def _folder(profile, given: Path | None) -> Path:
    if given is not None:
        return given
    for m in profile.measurements:
        if m.endswith("cases.json"):
            folder = Path(m).parent
            return folder.parent if folder.name == "kernels_real" else folder
    raise InputError(f"profile {profile.name} records no cases.json; pass --measurements DIR")


def run(args: argparse.Namespace) -> int:
    from simulator.profile import load_profile
    from simulator.validation import evaluate, load_cases, recorded_holdout, summary_lines

    profile_file = args.profile if Path(args.profile).is_file() else None
    measured = args.measurements.rglob("*.json") if args.measurements and args.measurements.is_dir() else ()
    check_outputs({"--html": args.html}, [profile_file, *measured])
    profile = load_profile(args.profile)
    layer = profile.fit.get("layer") or {}
    eager_from = layer.get("eager_cases") if args.measurements is None else None
    cases = [c for c in load_cases(_folder(profile, args.measurements), eager_from=eager_from)
             if c.get("device", "cuda") != "cpu"]
    if not cases:
        raise InputError("no GPU cases to validate against")
    recorded_presets, recorded_tokens = recorded_holdout(profile)
    presets = args.holdout_presets if args.holdout_presets is not None else recorded_presets
    tokens = args.holdout_tokens if args.holdout_tokens is not None else recorded_tokens
    from tqdm import tqdm

    with tqdm(total=len(cases), desc="validate", file=sys.stderr, disable=args.json or args.markdown or None) as bar:
        report = evaluate(profile, cases, presets, tokens, progress=bar.update)
    if args.html:
        from simulator.report.build import write_validation_html

        write_validation_html(report, args.html, invocation())
    if args.json:
        print(dumps(report))
    elif args.markdown:
        from simulator.validation_markdown import report_markdown

        print(report_markdown(report), end="")
    else:
        print("\n".join(summary_lines(report)))
        if args.html:
            print(written("validation page", args.html))
    missed = [k for e in report["per_mode"].values() if e["n"] for k, v in e["targets"].items() if not v["met"]]
    return 1 if args.strict and missed else 0
