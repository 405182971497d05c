"""``moesim report SCENARIO.yaml... --html F``: the design-review page (timelines, gain curves, calibration,
threshold map, hazards) as one self-contained HTML file."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from simulator.errors import InputError
from simulator.outputs import check_outputs, dumps, written


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="design-review plots of scenarios as one offline HTML page",
        description="Simulate each scenario under each strategy and write one self-contained HTML page "
                    "(plotly.js embedded, opens offline): per-stream timelines of a decoder layer per strategy "
                    "(and, with --trace, a real trace next to its simulated replay), gain curves against tokens "
                    "and concurrency with the recommended thresholds, calibration (predicted vs measured), a "
                    "threshold map of the winning strategy, and the hazards moesim check finds. The header "
                    "names each profile's provenance (calibrated or datasheet), the moesim version and the "
                    "command.")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO.yaml", help="scenario YAML files")
    p.add_argument("--html", required=True, type=Path, metavar="F", help="the HTML file to write")
    p.add_argument("--trace", metavar="REAL.json", help="a Kineto trace to show next to its simulated replay")
    p.add_argument("--profile", metavar="P", help="profile name or JSON path for every scenario (and the trace)")
    p.add_argument("--validation", metavar="REPORT.json",
                   help="a stored `moesim validate --json` report for the calibration section (default: "
                        "validate a calibrated profile against the measurements it records, if any)")
    p.add_argument("--png", type=Path, metavar="F",
                   help="also save a screenshot of the whole page (needs Chromium; skipped with a message without); "
                        "docs/img/report.png is made this way")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(handler=run)


def command_line(args: argparse.Namespace) -> str:
    """The command that made the report, in canonical form."""
    argv = ["moesim", "report", *args.scenarios]
    for flag, value in (("--trace", args.trace), ("--profile", args.profile), ("--validation", args.validation),
                        ("--html", args.html), ("--png", args.png)):
        if value is not None:
            argv += [flag, str(value)]
    if args.json:
        argv.append("--json")
    return shlex.join(argv)


def run(args: argparse.Namespace) -> int:
    from simulator.cli.common import scenario_warnings, warn
    from simulator.report.browser import BrowserMissing, screenshot
    from simulator.report.build import write_scenarios_report
    from simulator.report.collect import load_scenarios

    if args.png is not None and args.png.suffix.lower() != ".png":
        raise InputError(f"--png {args.png}: expected a .png file name")
    profile_file = args.profile if args.profile is not None and Path(args.profile).is_file() else None
    check_outputs({"--html": args.html, "--png": args.png},
                  [*args.scenarios, args.trace, args.validation, profile_file])
    scenarios = load_scenarios(args.scenarios, args.profile)
    warn("report", [w for _, scenario in scenarios for w in scenario_warnings(scenario)])
    summary = write_scenarios_report(scenarios, args.html, command_line(args), profile=args.profile,
                                     trace=args.trace, validation=args.validation, progress=not args.json)
    out = summary.to_json_dict()
    if args.png is not None:
        try:
            screenshot(args.html, args.png)
            out["png"] = str(args.png)
        except BrowserMissing as err:
            print(f"moesim report: PNG skipped: {err}", file=sys.stderr)
            out["png"] = None
    if args.json:
        print(dumps(out))
        return 0
    print(written("report", summary.html, f"{len(summary.figures)} figures"))
    for line in summary.profiles:
        print(f"  profile {line}")
    for key, state in summary.sections.items():
        print(f"  {key}: {state}")
    if out.get("png"):
        print(written("screenshot", out["png"], "the whole page"))
    return 0
