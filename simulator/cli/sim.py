"""``moesim sim PROGRAM.yaml``: run a stream program through the engine."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simulator.cli.common import warn

if TYPE_CHECKING:
    from simulator.ir import Program

MAX_US = 1e9  # any one duration or host cost: 1000 s is far beyond a kernel, and keeps sums finite


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sim", help="simulate a stream program (YAML/JSON)",
        description="Simulate a stream program: per kernel its start and end, per stream its busy time, and "
                    "the makespan (µs). Timings come from the program's own dur_us/host costs (each at most "
                    f"{MAX_US:.0e} µs). A capture region with capture errors is not simulated: it is reported "
                    "as a warning (moesim check explains it).")
    p.add_argument("program", help="stream program, .yaml or .json (see scenarios/programs/)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--trace-out", metavar="F", help="write a Perfetto/Chrome trace JSON of the simulated run")
    p.set_defaults(handler=run)


def check_durations(program: Program, source: str) -> None:
    """Refuse a duration or host cost above ``MAX_US`` (the schema already refuses negative and non-finite)."""
    from simulator.errors import InputError

    for name, value in program.host.model_dump().items():
        if isinstance(value, float) and value > MAX_US:
            raise InputError(f"{source}: host.{name}: got {value:g}; expected a number ≥ 0 and ≤ {MAX_US:.0e} µs")
    for index, op in enumerate(program.ops):
        for name in ("dur_us", "host_us"):
            value = getattr(op, name, None)
            if value is not None and value > MAX_US:
                raise InputError(f"{source}: ops[{index}].{op.op}.{name}: got {value:g}; expected a number ≥ 0 and "
                                 f"≤ {MAX_US:.0e} µs")


def run(args: argparse.Namespace) -> int:
    from simulator.engine import simulate
    from simulator.expand import expand
    from simulator.ir import CaptureBegin, load_program
    from simulator.outputs import check_finite, check_outputs, dumps, write_json_atomic, written
    from simulator.perfetto import to_chrome_trace

    check_outputs({"--trace-out": args.trace_out}, [args.program])
    program = load_program(args.program)
    check_durations(program, args.program)
    errors = expand(program).capture_errors if any(isinstance(op, CaptureBegin) for op in program.ops) else []
    warn("sim", [f"capture error ({e.kind}) in graph {e.graph!r}: {e.detail}; the graph's kernels were not "
                 "simulated (see moesim check)" for e in errors])
    result = simulate(program)
    check_finite({"makespan_us": result.makespan_us, "streams": result.streams})
    if args.trace_out:
        write_json_atomic(args.trace_out, to_chrome_trace(result, program.name or "moesim"))
    if args.json:
        print(dumps({**result.to_json_dict(), "capture_errors": [e.to_dict() for e in errors]}))
        return 0
    print(f"program {program.name or args.program}: {len(result.kernels)} kernels, "
          f"makespan {result.makespan_us:.3f} µs (durations and host costs as written in the program)")
    for stream, busy in result.streams.items():
        share = busy / result.makespan_us if result.makespan_us else 0.0
        print(f"  stream {stream:<12} busy {busy:10.3f} µs ({share:6.1%})")
    for warning in result.warnings:
        print(f"  warning: {warning}")
    if args.trace_out:
        print(written("trace", args.trace_out, "open in ui.perfetto.dev"))
    return 0
