"""``moesim sweep SCENARIO.yaml --set load.concurrency=1,2,4,...``: the scenario over a cartesian grid."""

from __future__ import annotations

import argparse
import json

from simulator.outputs import dumps, invocation
from simulator.scenario import load_document
from simulator.sweep import parse_set, sweep


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a scenario over a cartesian grid of --set values",
        description="Evaluate the scenario for every combination of the --set values (each FIELD.PATH a "
                    "dotted path into the scenario, e.g. load.concurrency or parallelism.tp; values as YAML). "
                    "Runs in local processes (--jobs) or on a Dask cluster (--executor dask://HOST:PORT, extra "
                    "[dask]); results are identical to a serial run. Figures come from the scenario's profile.")
    p.add_argument("scenario", help="scenario YAML")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD.PATH=V1,V2,...",
                   help="an axis of the sweep (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="local worker processes (default 1: serial)")
    p.add_argument("--executor", metavar="dask://HOST:PORT", help="run on a Dask distributed cluster instead")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--html", metavar="F", help="write gain and step-time curves over the sweep (offline HTML)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    axes = [parse_set(text) for text in args.sets]
    document = sweep(load_document(args.scenario), axes, args.scenario, jobs=args.jobs, address=args.executor)
    if args.html:
        from simulator.report.build import write_sweep_html

        write_sweep_html(document, args.html, invocation())
    if args.json:
        print(dumps(document))
        return 0
    cases = document["cases"]
    if cases:
        print(f"scenario {args.scenario}: {len(cases)} case(s); profile: {cases[0]['profile']['describe']}")
        links = {json.dumps(case["link"], sort_keys=True) for case in cases}
        link = cases[0]["link"]
        print("link (collectives): " + (f"{link['bandwidth_GBps']:g} GB/s per direction, {link['latency_us']:g} µs "
                                        f"per collective ({link['source']})" if len(links) == 1
                                        else "varies over the sweep (see --json)"))
    names = [r["strategy"] + (" + dbo" if r["dbo"] else "") for r in cases[0]["results"]] if cases else []
    header = "  ".join(f"{a.path:>18}" for a in axes)
    print(f"{header}  {'step ms / gain vs sequential: ' + ' | '.join(names)}")
    for case in cases:
        params = "  ".join(f"{case['params'][a.path]!s:>18}" for a in axes)
        cells = []
        for r in case["results"]:
            if r["step_us"] is None:
                cells.append("—")
            else:
                cells.append(f"{r['step_us'] / 1000:.3f} ({r['gain_vs_sequential']:+.2%})")
        print(f"{params}  {' | '.join(cells)}")
    return 0
