"""benchmarks/decisions_traced.py's table at chosen token counts, with another start's gains beside."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.decisions import GainPoint
from simulator.profile import load_profile
from tests.helpers_benchmarks import load_benchmark


@pytest.fixture(autouse=True)
def _benchmarks_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script imports its sibling ``decisions`` as a script run from ``benchmarks/`` would."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "benchmarks"))


def test_table_lists_the_chosen_tokens_and_another_starts_gain() -> None:
    """Points at 4 and 256 tokens; the table at 256 lists only that point, with the other start's -2.0 % and the
    offsets (+1.0 % traced vs -1.0 % measured: +2.0 points; shape +3.0 %: +4.0), and counts 0/1 within ±1.5."""
    traced = [GainPoint("p@tp4", 4, 0.05, 0.05), GainPoint("p@tp4", 256, -0.01, 0.01)]
    shape = [GainPoint("p@tp4", 4, 0.05, 0.04), GainPoint("p@tp4", 256, -0.01, 0.03)]
    other = (Path("elsewhere"), {("p@tp4", 256): -0.02})
    text = load_benchmark("decisions_traced").markdown(traced, shape, 0.005, load_profile("h200"), [Path("run")],
                                                       [Path("traces")], (256,), other)
    rows = [line for line in text.splitlines() if line.startswith("| p@tp4 |")]
    assert rows == ["| p@tp4 | 256 | -1.0 % | -2.0 % | +1.0 % | +2.0 | +3.0 % | +4.0 |"]
    assert "At 256 tokens: predicted gain within ±1.5 points of measured in 0/1 (trace what-if) and 0/1" in text
    assert "Another machine start: `elsewhere`." in text
