"""The ``moesim`` command: one sub-command per module; bad input is one line on stderr and exit code 2.

Sub-command modules import only ``argparse`` (and ``simulator.cli.common``) at module level: what a command
computes with is imported when it runs, so ``moesim --help`` and argument errors stay fast."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from simulator.errors import InputError

SUBCOMMANDS = ("run", "sweep", "thresholds", "whatif", "report", "sim", "check", "calibrate", "validate", "schema")


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from simulator.report.page import moesim_version

        print(f"moesim {moesim_version()}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every sub-command, or (``only``) just the one being run."""
    parser = argparse.ArgumentParser(
        prog="moesim",
        description="Simulate multi-stream GPU execution of MoE layers: does overlapping the shared experts "
                    "on an aux stream pay off, where should the thresholds sit, and is the schedule race-free "
                    "and graph-capturable?",
    )
    parser.add_argument("--version", action=_Version, help="print moesim's version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS if only is None else (only,):
        importlib.import_module(f"simulator.cli.{name}").add_parser(subparsers)
    return parser


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub-)sub-command parser that ``args`` were parsed by, for its usage line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return innermost(action.choices[chosen], args)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    parser = build_parser(command)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
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
