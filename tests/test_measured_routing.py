"""simulator.measured_routing: the experts a bench run's weight sets hit, attached to its cases and simulated."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.measured_routing import find_routing, load_routing, with_routing
from simulator.profile import load_profile
from simulator.validation import load_cases, predict_case


def _write_routing(folder: Path, records: list[dict], torch_version: str = "2.11.0+cu130") -> Path:
    folder.mkdir(parents=True)
    with gzip.open(folder / "routing.json.gz", "wt") as f:
        json.dump({"records": records}, f)
    (folder / "env.json").write_text(json.dumps({"torch": torch_version}))
    return folder / "routing.json.gz"


def _write_run(folder: Path, cases: list[dict], torch_version: str = "2.11.0+cu130") -> Path:
    folder.mkdir(parents=True)
    (folder / "cases.json").write_text(json.dumps(cases))
    (folder / "env.json").write_text(json.dumps({"torch": torch_version}))
    return folder / "cases.json"


CASE = {"preset": "deepseek_v3", "tokens": 2, "strategy": "sequential", "mode": "graph", "median_us": 700.0,
        "weight_sets": 2, "layers_per_replay": 2}


def test_cases_get_the_mean_of_their_sets_hits() -> None:
    routing = {("deepseek_v3", 0, 2): 16, ("deepseek_v3", 1, 2): 13, ("deepseek_v3", 2, 2): 15}
    (case,) = with_routing([CASE], routing)
    assert case["touched_experts"] == pytest.approx(14.5)  # sets 0 and 1 only: the case timed two
    three = with_routing([{**CASE, "weight_sets": 4}], routing)[0]
    assert "touched_experts" not in three  # set 3 not redrawn: left to the expectation


def test_routing_file_of_the_same_gpu_and_torch(tmp_path: Path) -> None:
    """The newest dated routing folder of the run's GPU is taken, and only for a run of the same torch."""
    gpu = tmp_path / "h200"
    counts = [0] * 256
    counts[:3] = [1, 2, 1]
    _write_routing(gpu / "2026-12-01" / "routing", [{"preset": "deepseek_v3", "set": 0, "tokens": 2,
                                                     "counts": [1] * 16 + [0] * 240}])
    newest = _write_routing(gpu / "2026-12-04" / "routing", [{"preset": "deepseek_v3", "set": s, "tokens": 2,
                                                              "counts": counts} for s in (0, 1)])
    run = _write_run(gpu / "2026-12-02" / "bench", [CASE])
    assert find_routing(run) == newest
    assert load_routing(newest) == {("deepseek_v3", 0, 2): 3, ("deepseek_v3", 1, 2): 3}
    assert load_cases(run.parent)[0]["touched_experts"] == 3.0
    other = _write_run(gpu / "2026-12-03" / "bench", [CASE], torch_version="2.9.0+cu128")
    assert find_routing(other) is None and "touched_experts" not in load_cases(other.parent)[0]


def test_a_broken_routing_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "routing.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(InputError, match="not a routing_counts output"):
        load_routing(bad)


def test_more_experts_hit_take_longer() -> None:
    """The grouped GEMMs stream one weight block per expert hit: 16 experts at 2 tokens cost more than 12."""
    profile = load_profile("h200")
    few = predict_case(profile, {**CASE, "touched_experts": 12.0}, quick=True)
    many = predict_case(profile, {**CASE, "touched_experts": 16.0}, quick=True)
    assert many > few * 1.1


def test_the_report_says_which_routing_it_simulated() -> None:
    from simulator.validation import evaluate, routing_line

    cases = [{**CASE, "touched_experts": 14.0}, {**CASE, "strategy": "multi_stream"}]
    report = evaluate(load_profile("h200"), cases)
    assert report["measured_routing"] == 1
    assert routing_line(report) == ("routing: 1 of 2 cases simulated with the experts their weight sets' routers "
                                    "hit; the other 1 with its expectation")
