"""A non-editable install carries what ``moesim validate`` and ``moesim report`` read: the package-data globs of
``pyproject.toml`` cover every measurement file the shipped calibrated profiles validate against."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from simulator.measured_routing import find_routing
from simulator.validation import eager_rerun_path, find_file

ROOT = Path(__file__).resolve().parents[1]


def _shipped() -> set[Path]:
    """Every file the package-data globs of every package cover."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    return {p.resolve() for package, patterns in data.items() for pattern in patterns
            for p in (ROOT / package.replace(".", "/")).glob(pattern)}


def _read_by_validate(profile: dict) -> list[Path]:
    """The files ``moesim validate`` (and the report's calibration section) read for a profile."""
    out = []
    for m in profile["measurements"]:
        if m.endswith("cases.json"):
            folder = (ROOT / m).parent
            folder = folder.parent if folder.name == "kernels_real" else folder
            cases = find_file(folder, "cases.json", "kernels_real")
            out += [cases, cases.parent / "env.json"]
            rerun = eager_rerun_path(folder)
            if rerun is not None:
                out += [rerun, rerun.parent / "env.json"]
            routing = find_routing(cases)
            if routing is not None:  # the experts each case's weight sets hit
                out += [routing, routing.parent / "env.json"]
            break
    return [p.resolve() for p in out]


def test_package_data_holds_what_validate_reads() -> None:
    shipped = _shipped()
    profiles = [json.loads(p.read_text()) for p in sorted((ROOT / "simulator" / "profiles").glob("*.json"))]
    needed = [f for p in profiles if p["provenance"] == "calibrated" for f in _read_by_validate(p)]
    assert needed, "no calibrated profile names its layer measurements"
    assert all(f.is_file() for f in needed)
    missing = [str(f.relative_to(ROOT)) for f in needed if f not in shipped]
    assert not missing, f"not in pyproject's package-data: {missing}"


def test_package_data_holds_the_profiles() -> None:
    shipped = _shipped()
    profiles = sorted((ROOT / "simulator" / "profiles").glob("*.json"))
    assert profiles and all(p.resolve() in shipped for p in profiles)


def test_package_data_stays_small() -> None:
    size = sum(p.stat().st_size for p in _shipped() if p.is_file())
    assert size < 2_000_000, f"package data is {size / 1e6:.1f} MB: ship only what validate/report read"
