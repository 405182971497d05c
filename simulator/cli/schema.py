"""``moesim schema``: the scenario JSON schema, for editor completion (``moesim schema > scenario.schema.json``)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("schema", help="print the scenario JSON schema",
                              description="Print the JSON schema of scenario files (for editor completion: "
                                          "moesim schema > scenario.schema.json).")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from simulator.outputs import dumps
    from simulator.scenario import json_schema

    print(dumps(json_schema()))
    return 0
