"""``moesim sim PROGRAM.yaml``: run a stream program through the engine."""

from __future__ import annotations

import argparse

from simulator.engine import simulate
from simulator.ir import load_program
from simulator.outputs import dumps, write_json_atomic
from simulator.perfetto import to_chrome_trace


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sim", help="simulate a stream program (YAML/JSON)",
        description="Simulate a stream program: per kernel its start and end, per stream its busy time, and "
                    "the makespan (µs). Timings come from the program's own dur_us/host costs.")
    p.add_argument("program", help="stream program, .yaml or .json (see scenarios/programs/)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--trace-out", metavar="F", help="write a Perfetto/Chrome trace JSON of the simulated run")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    result = simulate(program)
    if args.trace_out:
        write_json_atomic(args.trace_out, to_chrome_trace(result, program.name or "moesim"))
    if args.json:
        print(dumps(result.to_json_dict()))
        return 0
    print(f"program {program.name or args.program}: {len(result.kernels)} kernels, "
          f"makespan {result.makespan_us:.3f} µs (durations and host costs as written in the program)")
    for stream, busy in result.streams.items():
        share = busy / result.makespan_us if result.makespan_us else 0.0
        print(f"  stream {stream:<12} busy {busy:10.3f} µs ({share:6.1%})")
    for warning in result.warnings:
        print(f"  warning: {warning}")
    if args.trace_out:
        print(f"trace written to {args.trace_out} (open in ui.perfetto.dev)")
    return 0
