"""What the scenario commands (run, sweep, thresholds) share: ``--profile`` and ``--set`` overrides, the
``--html`` option, output checks before the work and warnings on stderr. Imports nothing heavy at module
level (``moesim --help`` loads every sub-command's parser)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.scenario import Scenario
    from simulator.sweep import Axis


def number_in(low: float, high: float, integer: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number (an integer with ``integer``) from ``low`` to ``high``."""
    kind = "an integer" if integer else "a number"

    def parse(text: str) -> float:
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {kind} from {low:g} to {high:g}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {kind} from {low:g} to {high:g}")
        return value

    return parse


def add_scenario_options(p: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """``--profile``, ``--set`` and ``--html`` as every scenario command spells them."""
    p.add_argument("--profile", metavar="P",
                   help="profile name or JSON path, instead of the scenario's platform.profile")
    if sweep:
        p.add_argument("--set", dest="axes", action="append", default=[], metavar="FIELD.PATH=V1,V2,...",
                       help="an axis of the sweep: a dotted path into the scenario and its values as YAML "
                            "(repeatable: the cases are every combination)")
    else:
        p.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD.PATH=V",
                       help="override one scenario field, e.g. load.concurrency=64 (value as YAML; repeatable)")
    p.add_argument("--html", metavar="F", type=Path, help="also write the design-review page (offline HTML)")


def overrides(profile: str | None, sets: list[str]) -> list[Axis]:
    """``--profile`` and the ``--set`` items as axes, refusing a field given twice."""
    from simulator.sweep import Axis, check_distinct, parse_set

    axes = ([Axis("platform.profile", (profile,))] if profile is not None else []) + [parse_set(t) for t in sets]
    check_distinct(axes)
    return axes


def load_with_overrides(args: argparse.Namespace) -> tuple[Scenario, str]:
    """The scenario with ``--profile``/``--set`` applied (one value each), and the overrides as text ("" if
    none)."""
    from simulator.scenario import load_document, load_scenario, parse_scenario, with_value

    axes = overrides(args.profile, args.sets)
    for axis in axes:
        if len(axis.values) != 1:
            raise InputError(f"--set {axis.path}: give one value here (moesim sweep runs several)")
    if not axes:
        return load_scenario(args.scenario), ""
    doc = load_document(args.scenario)
    for axis in axes:
        doc = with_value(doc, axis.path, axis.values[0])
    text = ", ".join(f"{a.path}={a.values[0]}" for a in axes)
    return parse_scenario(doc, f"{args.scenario} ({text})"), text


def profile_input(profile: str | None) -> str | None:
    """A ``--profile`` that is a file (an input the outputs must not overwrite)."""
    return profile if profile is not None and Path(profile).is_file() else None


def warn(command: str, lines: list[str]) -> None:
    """Warnings on stderr, one per line, each once."""
    for line in dict.fromkeys(lines):
        print(f"moesim {command}: warning: {line}", file=sys.stderr)


def scenario_warnings(scenario: Scenario) -> list[str]:
    """Where the scenario leaves its profile's calibrated range (see ``simulator.calibrated_range``)."""
    from simulator.calibrated_range import range_warnings
    from simulator.evaluate import step_case

    return list(range_warnings(step_case(scenario), tuple(scenario.strategies.compare)))
