"""Imports run one way: ``calibration/`` measures and fits with the simulator, the simulator never imports
``calibration`` (not at module level, not inside a function, not by name through importlib); its commands reach
``moesim`` through the ``moesim.commands`` entry points."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import simulator.cli.main as cli_main
from simulator.cli.main import ENTRY_POINTS, SUBCOMMANDS, declared_in_checkout, main

ROOT = Path(__file__).resolve().parents[1]
IMPORTERS = {"import_module", "__import__", "files", "find_spec", "import_from_path"}


def _calibration_imports(path: Path) -> list[str]:
    """Every place in a module that imports ``calibration`` (or names it to an importer)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in IMPORTERS and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found += [f"{path.name}:{node.lineno} {name}" for name in names
                  if name == "calibration" or name.startswith("calibration.")]
    return found


def test_the_scan_finds_every_form(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("import calibration\nimport calibration.fit as f\nfrom calibration.fit import x\n"
              "def g():\n    from calibration import cli\n    importlib.import_module('calibration.cli')\n"
              "    resources.files('calibration')\n    import calibrationx\n    from simulator import calibration\n")
    found = sorted(hit.split(" ")[1] for hit in _calibration_imports(module))
    assert found == ["calibration", "calibration", "calibration", "calibration.cli", "calibration.fit",
                     "calibration.fit"]


def test_simulator_never_imports_calibration() -> None:
    found = [f"{path.parent.relative_to(ROOT)}/{hit}" for path in sorted((ROOT / "simulator").rglob("*.py"))
             for hit in _calibration_imports(path)]
    assert not found, f"simulator/ imports calibration: {found}"


def _assert_runs(code: str) -> None:
    """Run ``code`` in a fresh interpreter on this checkout; its assertions must hold."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


def test_importing_every_simulator_module_loads_no_calibration() -> None:
    code = ("import pkgutil, importlib, sys, simulator\n"
            "for m in pkgutil.walk_packages(simulator.__path__, 'simulator.'):\n"
            "    importlib.import_module(m.name)\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'calibration')\n"
            "assert not loaded, loaded\n")
    _assert_runs(code)


def test_build_parser_loads_the_calibrate_entry_point_only() -> None:
    code = ("import sys\nfrom simulator.cli.main import build_parser\nbuild_parser()\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'calibration')\n"
            "assert loaded == ['calibration', 'calibration.cli'], loaded\n")
    _assert_runs(code)


def test_pyproject_registers_calibrate() -> None:
    declared = declared_in_checkout(ROOT)
    assert declared == {"calibrate": "calibration.cli:add_parser"}
    entry = EntryPoint("calibrate", declared["calibrate"], ENTRY_POINTS)
    from calibration.cli import add_parser

    assert entry.load() is add_parser


def test_no_checkout_pyproject_outside_a_checkout(tmp_path: Path) -> None:
    assert declared_in_checkout(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert declared_in_checkout(tmp_path) is None


@pytest.fixture()
def commands_from(monkeypatch: pytest.MonkeyPatch):
    """Make ``external_commands`` see only the given installed entry points (no checkout's pyproject)."""
    def use(entries: list[EntryPoint]) -> None:
        monkeypatch.setattr(cli_main, "declared_in_checkout", lambda: None)
        monkeypatch.setattr("importlib.metadata.entry_points",
                            lambda group: [e for e in entries if e.group == group])
        cli_main.external_commands.cache_clear()
    yield use
    cli_main.external_commands.cache_clear()


def test_installed_entry_points_add_commands(commands_from, capsys: pytest.CaptureFixture[str]) -> None:
    commands_from([EntryPoint("calibrate", "calibration.cli:add_parser", ENTRY_POINTS),
                   EntryPoint("run", "calibration.cli:add_parser", ENTRY_POINTS),  # a built-in is not replaced
                   EntryPoint("other", "x:y", "another.group")])
    assert cli_main.external_commands() == {"calibrate": "calibration.cli:add_parser"}
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert listed == [*SUBCOMMANDS[:7], "calibrate", *SUBCOMMANDS[7:]]
    assert main(["calibrate", "--out", "p.txt", "--from-measurements", "."]) == 2
    assert "a profile is a .json file" in capsys.readouterr().err


def test_without_entry_points_calibrate_says_how_to_install(commands_from,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    commands_from([])
    assert main(["calibrate", "--out", "p.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: moesim") and "no sub-command 'calibrate'" in err
    assert "'moesim.commands' entry points" in err and "pip install -e ." in err
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "calibrate" not in capsys.readouterr().out
