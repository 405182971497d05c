"""The ``moesim`` command: one sub-command per module; bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import importlib
import sys

from simulator.errors import InputError

SUBCOMMANDS = ("run", "sweep", "thresholds", "whatif", "report", "sim", "check", "calibrate", "validate", "schema")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every sub-command, or (``only``) just the one being run: each sub-command's module
    pulls in what it needs (scenarios, traces, plots), and ``moesim sim`` should not pay for the rest."""
    parser = argparse.ArgumentParser(
        prog="moesim",
        description="Simulate multi-stream GPU execution of MoE layers: does overlapping the shared experts "
                    "on an aux stream pay off, where should the thresholds sit, and is the schedule race-free "
                    "and graph-capturable?",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS if only is None else (only,):
        importlib.import_module(f"simulator.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    args = build_parser(command).parse_args(argv)
    try:
        return args.handler(args)
    except InputError as err:
        print(f"moesim {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print(f"moesim {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
