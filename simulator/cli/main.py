"""The ``moesim`` command: one sub-command per module; bad input is one line on stderr and exit code 2.

Sub-command modules import only ``argparse`` (and ``simulator.cli.common``) at module level: what a command
computes with is imported when it runs, so ``moesim --help`` and argument errors stay fast.

Other packages add sub-commands through the entry point group ``moesim.commands`` (name = ``module:function``,
the function adding the sub-command's parser, as ``add_parser`` here): ``moesim calibrate`` comes from the
calibration package that way, so the simulator never imports it. They are looked up only when the command line
names no built-in sub-command (``moesim --help`` lists them after ``check``)."""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from pathlib import Path
from typing import Any

from simulator.errors import InputError

SUBCOMMANDS = ("run", "sweep", "thresholds", "whatif", "report", "sim", "check", "validate", "schema")
ENTRY_POINTS = "moesim.commands"
EXTERNAL_AFTER = "check"  # where --help lists the other packages' sub-commands (measuring before validate)
ROOT = Path(__file__).resolve().parents[2]  # the folder holding the simulator package: a checkout's root?


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
    if only is not None:
        _add(subparsers, only)
        return parser
    for name in SUBCOMMANDS:
        _add(subparsers, name)
        if name == EXTERNAL_AFTER:
            for other in external_commands():
                _add(subparsers, other)
    return parser


def _add(subparsers: argparse._SubParsersAction, name: str) -> None:
    """Add a built-in sub-command's parser, or another package's (its entry point loaded now)."""
    if name in SUBCOMMANDS:
        importlib.import_module(f"simulator.cli.{name}").add_parser(subparsers)
        return
    module, _, function = external_commands()[name].partition(":")
    getattr(importlib.import_module(module.strip()), function.strip())(subparsers)


@functools.cache
def external_commands() -> dict[str, str]:
    """The other packages' sub-commands (name -> ``module:function``; built-in names are not overridden): the
    ``moesim.commands`` entry points that this checkout's ``pyproject.toml`` declares when moesim runs from a
    source tree (installed metadata may be another tree's, or older than the tree), else those of the installed
    distributions."""
    declared = declared_in_checkout()
    if declared is None:
        from importlib.metadata import entry_points

        declared = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINTS)}
    return {name: value for name, value in declared.items() if name not in SUBCOMMANDS}


def declared_in_checkout(root: Path = ROOT) -> dict[str, str] | None:
    """The ``moesim.commands`` entry points of moesim's ``pyproject.toml`` in ``root`` (the folder holding the
    ``simulator`` package); None when that is no moesim checkout (an installed copy)."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    import tomllib

    project = tomllib.loads(pyproject.read_text()).get("project", {})
    if project.get("name") != "moesim":
        return None
    return dict(project.get("entry-points", {}).get(ENTRY_POINTS, {}))


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
    name = argv[0] if argv else ""
    command = name if name in SUBCOMMANDS or (name[:1] not in ("", "-") and name in external_commands()) else None
    parser = build_parser(command)
    if command is None and name[:1] not in ("", "-") and not external_commands():
        parser.print_usage(sys.stderr)
        print(f"moesim: error: no sub-command {name!r}; other packages' sub-commands (the calibration package's "
              f"calibrate) are registered through the {ENTRY_POINTS!r} entry points, and none is: reinstall "
              "moesim (pip install -e . in a checkout, or pip install .)", file=sys.stderr)
        return 2
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
