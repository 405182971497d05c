"""``calibration.fit_whatif``: the decode sets found under a measurements folder (eager traces beside layout means,
matched by suffix), and the trace what-if's choices scored as a policy on one committed set, point by point the
same as ``moesim whatif trace`` and the layout means give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.fit_whatif import decode_sets, eager_whatifs, predicted_gain, whatif_decisions_report
from simulator.decisions import GainPoint, score
from simulator.profile import load_profile

MEASURED = Path(__file__).resolve().parent.parent / "calibration" / "measurements" / "h200" / "2026-12-03"


def _folder(root: Path, name: str, traces: bool = False, cases: bool = False) -> None:
    (root / name).mkdir()
    if traces:
        (root / name / "traces").mkdir()
    if cases:
        (root / name / "cases.json").write_text("[]")


def test_sets_pair_eager_traces_with_layout_means_by_suffix(tmp_path: Path) -> None:
    _folder(tmp_path, "eager_traces", traces=True)
    _folder(tmp_path, "layout_means", cases=True)
    _folder(tmp_path, "eager_traces_heldout7", traces=True)
    _folder(tmp_path, "layout_means_heldout7", cases=True)
    _folder(tmp_path, "eager_traces_heldout8", traces=True)  # no layout means beside it
    _folder(tmp_path, "layout_means_heldout9", cases=True)  # no eager traces beside it
    assert decode_sets(tmp_path) == [(tmp_path / "eager_traces", tmp_path / "layout_means"),
                                     (tmp_path / "eager_traces_heldout7", tmp_path / "layout_means_heldout7")]
    assert decode_sets(tmp_path / "layout_means") == []


def test_the_report_scores_each_trace_as_the_what_if_predicts_it(tmp_path: Path) -> None:
    """One committed set (call 35) copied alone under a folder: the report's points are the set's traces with a
    measured point, and its scores are those of the same points scored directly."""
    set_root = tmp_path / "m"
    set_root.mkdir()
    (set_root / "eager_traces_heldout5").symlink_to(MEASURED / "eager_traces_heldout5")
    (set_root / "layout_means_heldout5").symlink_to(MEASURED / "layout_means_heldout5")
    profile = load_profile("h200")
    report = whatif_decisions_report(profile, decode_sets(set_root), rel=lambda p: p.name)
    assert report is not None and report["sets"] == [
        {"traces": "eager_traces_heldout5", "reference": "layout_means_heldout5", "points": report["points"]}]
    found = [GainPoint(k[0], k[1], m, predicted_gain(r)) for k, m, r in
             eager_whatifs(MEASURED / "eager_traces_heldout5", MEASURED / "layout_means_heldout5", profile)]
    assert report["points"] == len(found) == 32
    assert report["scores"] == [s.to_json_dict() for s in score(found, 0.005)]
    assert report["verdict"][0].startswith("the trace what-if ")
    json.dumps(report)  # a profile document holds it


def test_no_decode_set_gives_no_report(tmp_path: Path) -> None:
    assert decode_sets(tmp_path) == []
    assert whatif_decisions_report(load_profile("h200"), decode_sets(tmp_path)) is None


def test_a_point_is_the_cli_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_cli_hardening import moesim

    key, _, result = next(w for w in eager_whatifs(MEASURED / "eager_traces_heldout5",
                                                   MEASURED / "layout_means_heldout5", "h200")
                          if w[0] == ("kimi_k2@tp8", 3))
    trace = MEASURED / "eager_traces_heldout5" / "traces" / "kimi_k2@tp8_t3_sequential_eager.json.gz"
    code, out, _ = moesim(["whatif", "trace", str(trace), "--aux-region", "moe.shared_experts", "--launch",
                           "graph", "--profile", "h200", "--json"], capsys)
    assert code == 0 and key == ("kimi_k2@tp8", 3)
    assert predicted_gain(result) == pytest.approx(json.loads(out)["gain"], abs=1e-5)
