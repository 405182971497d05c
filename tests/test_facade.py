"""The package facade resolves every name it advertises."""

from __future__ import annotations

import simulator


def test_every_exported_name_resolves():
    for name in simulator.__all__:
        assert getattr(simulator, name) is not None


def test_facade_runs_a_program():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scenarios" / "programs" / "seed003_lazy_switch_race.yaml"
    program = simulator.load_program(path)
    assert [h.kind for h in simulator.find_hazards(program)] == ["RAW"]
    assert simulator.simulate(program).makespan_us > 0
