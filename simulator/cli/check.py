"""``moesim check PROGRAM.yaml``: hazards and graph-capture legality of a stream program."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "check", help="find cross-stream races and graph-capture errors",
        description="Check a stream program for data races (happens-before over kernels' reads/writes, "
                    "vector clocks as in PyTorch's CUDA sanitizer) and graph-capture errors (unjoined "
                    "forks, waits on events recorded outside the capture). Exit code 0 clean, 1 found, "
                    "2 bad input.")
    p.add_argument("program", help="stream program, .yaml or .json")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from simulator.expand import expand
    from simulator.hazards import find_hazards
    from simulator.ir import load_program
    from simulator.outputs import dumps

    program = load_program(args.program)
    expansion = expand(program)
    hazards = find_hazards(program, expansion)
    errors = expansion.capture_errors
    if args.json:
        print(dumps({
            "hazards": [h.to_dict() for h in hazards],
            "capture_errors": [e.to_dict() for e in errors],
            "warnings": expansion.warnings,
        }))
    else:
        label = program.name or args.program
        if not hazards and not errors:
            print(f"{label}: clean (no races, capture legal)")
        for h in hazards:
            print(f"{label}: {h.describe()}")
        for e in errors:
            print(f"{label}: capture error ({e.kind}) in graph {e.graph!r}: {e.detail}")
        for w in expansion.warnings:
            print(f"{label}: warning: {w}")
    return 1 if hazards or errors else 0
