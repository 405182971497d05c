"""``benchmarks/heldout_sets.py``: the eager what-if's figures per decode set and pooled, checked on hand-made
points, and its recorded runs of older checkouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.errors import InputError
from tests.helpers_benchmarks import load_benchmark

hs = load_benchmark("heldout_sets")
whatif = load_benchmark("whatif_graph_traces")


def _point(preset: str, tokens: int, measured: float, predicted: float):
    return whatif.Point(preset, tokens, "moe.shared_experts", measured, predicted, "test profile")


# measured / predicted gains (fractions), worked by hand below
POINTS = [_point("a", 1, 0.05, 0.03), _point("a", 2, -0.04, 0.02), _point("b", 4, 0.002, 0.01),
          _point("b", 16, 0.03, -0.01)]


def test_a_row_is_the_hand_computed_figures() -> None:
    """Offs 2, 6, 0.8, 4 points: median 3, worst 6. Counted signs (|measured| > 1 %): a1 right, a2 wrong, b16
    wrong. At ≤ 4 tokens within ±1.5 points: b4 only. The what-if (margin 0.5 %) picks a1, a2, b4, not b16:
    regrets 0, 4, 0, 3 → mean 1.75, worst 4; always: 0, 4, 0, 0 → 1, 4."""
    gains = [hs.GainPoint(p.preset, p.tokens, p.measured_gain, p.predicted_gain) for p in POINTS]
    r = hs.row("set", gains, 0.005)
    assert (r.points, r.signs_wrong, r.signs_counted, r.within, r.small) == (4, 2, 3, 1, 3)
    assert (r.off_median, r.off_worst) == pytest.approx((3.0, 6.0))
    assert (r.whatif_mean, r.whatif_worst) == pytest.approx((1.75, 4.0))
    assert (r.always_mean, r.always_worst) == pytest.approx((1.0, 4.0))
    assert (r.vllm_mean, r.vllm_worst) == pytest.approx((1.0, 4.0))


def test_rows_pool_the_held_out_sets_and_all_sets() -> None:
    """The design set's points count in the all-sets row only."""
    sets = hs.SETS[:2]
    by_set = {sets[0]: POINTS[:2], sets[1]: POINTS[2:]}
    found, label = hs.rows(0.005, by_set.__getitem__, sets)
    assert label == "test profile"
    assert [r.label for r in found] == [sets[0].label, sets[1].label, "held-out sets pooled", "all sets pooled"]
    assert [r.points for r in found] == [2, 2, 2, 4]
    assert found[2] == hs.row("held-out sets pooled", [hs.GainPoint(p.preset, p.tokens, p.measured_gain,
                                                                    p.predicted_gain) for p in POINTS[2:]], 0.005)


def test_recorded_runs_print_under_the_current_rows_oldest_commit_first(tmp_path: Path) -> None:
    gains = [hs.GainPoint(p.preset, p.tokens, p.measured_gain, p.predicted_gain) for p in POINTS]
    rec = hs.row("set", gains, 0.005)
    for name, when in (("new", "2026-12-04T10:00:00+00:00"), ("old", "2026-12-03T10:00:00+00:00")):
        (tmp_path / f"{name}.json").write_text(json.dumps({"commit": name, "commit_date": when, "date": "x",
                                                           "rows": [hs.asdict(rec)]}))
    recorded = hs.load_recorded(tmp_path)
    assert [r["commit"] for r in recorded] == ["old", "new"]
    text = hs.markdown([rec], "test profile", recorded)
    lines = [line for line in text.splitlines() if " | set | " in line and not line.startswith("| model")]
    assert [line.split(" | ")[0] for line in lines] == ["| this checkout", "| old (committed 2026-12-03)",
                                                        "| new (committed 2026-12-04)"]


def test_a_missing_folder_of_recorded_runs_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such folder"):
        hs.load_recorded(tmp_path / "absent")
