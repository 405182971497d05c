"""``moesim sweep SCENARIO.yaml --set load.concurrency=1,2,4,...``: the scenario over a cartesian grid."""

from __future__ import annotations

import argparse
import json
from typing import Any

from simulator.cli.common import add_scenario_options, number_in, profile_input, warn


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a scenario over a cartesian grid of --set values",
        description="Evaluate the scenario for every combination of the --set values (each FIELD.PATH a "
                    "dotted path into the scenario, e.g. load.concurrency or parallelism.tp; values as YAML). "
                    "--zip pairs fields instead of crossing them. Runs in local processes (--jobs) or on a Dask "
                    "cluster (--executor dask://HOST:PORT, extra [dask]); results are identical to a serial run. "
                    "Every row names the profile its figures come from.")
    p.add_argument("scenario", help="scenario YAML")
    add_scenario_options(p, sweep=True)
    p.add_argument("--zip", dest="axes", action="append", nargs="+", metavar="FIELD.PATH=V1,V2,...",
                   help="fields whose values go together by position, e.g. --zip parallelism.tp=4,8,"
                        "parallelism.ep=4,8 (repeatable; crossed with the --set axes)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="run the valid cases and list the invalid ones at the end (default: refuse the sweep)")
    p.add_argument("--jobs", type=number_in(1, 1024, integer=True), default=1,
                   help="local worker processes (default 1: serial)")
    p.add_argument("--executor", metavar="dask://HOST:PORT", help="run on a Dask distributed cluster instead")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from simulator.cli.common import overrides
    from simulator.outputs import MAX_RESULT_US, check_finite, check_outputs, dumps, invocation, written
    from simulator.scenario import load_document
    from simulator.sweep import parse_set, parse_zip, sweep

    groups = overrides(args.profile, [])
    groups += [parse_zip(item) if isinstance(item, list) else parse_set(item) for item in args.axes]
    check_outputs({"--html": args.html}, [args.scenario, profile_input(args.profile)])
    document = sweep(load_document(args.scenario), groups, args.scenario, jobs=args.jobs, address=args.executor,
                     skip_invalid=args.skip_invalid, progress=not args.json)
    check_finite(document["cases"], limit=MAX_RESULT_US)
    warn("sweep", [w for case in document["cases"] for w in case["warnings"]])
    if args.html:
        from simulator.report.build import write_sweep_html

        write_sweep_html(document, args.html, invocation())
    if args.json:
        print(dumps(document))
        return 0
    print_table(document)
    if args.html:
        print(written("sweep page", args.html))
    return 0


def print_table(document: dict[str, Any]) -> None:
    """One row per case: the parameters, step time and gain per strategy, and the profile it was costed with."""
    cases, paths = document["cases"], list(document["axes"])
    links = {json.dumps(case["link"], sort_keys=True) for case in cases}
    link = cases[0]["link"]
    print(f"scenario {document['scenario']}: {len(cases)} case(s)")
    print("link (collectives): " + (f"{link['bandwidth_GBps']:g} GB/s per direction, {link['latency_us']:g} µs "
                                    f"per collective ({link['source']})" if len(links) == 1
                                    else "varies over the sweep (see --json)"))
    names = [r["strategy"] + (" + dbo" if r["dbo"] else "") for r in cases[0]["results"]]
    widths = [max(len(p), *(len(str(c["params"][p])) for c in cases)) for p in paths]
    header = "  ".join(f"{p:>{w}}" for p, w in zip(paths, widths, strict=True))
    print(f"{header}  step ms / gain vs sequential: {' | '.join(names)}  — profile")
    for case in cases:
        params = "  ".join(f"{case['params'][p]!s:>{w}}" for p, w in zip(paths, widths, strict=True))
        cells = ["—" if r["step_us"] is None else f"{r['step_us'] / 1000:.3f} ({r['gain_vs_sequential']:+.2%})"
                 for r in case["results"]]
        print(f"{params}  {' | '.join(cells)}  — {case['profile']['describe']}")
    skipped = document.get("skipped") or []
    if skipped:
        print(f"skipped {len(skipped)} invalid case(s):")
        for item in skipped:
            print(f"  {item['error']}")
