"""calibration.fit_replay: the once-per-replay excess of multi-stream graph replays, from replay-length runs."""

from __future__ import annotations

import json

import pytest

from calibration.fit_replay import first_fork_excess, first_fork_figure, load_replay_lengths
from simulator.errors import InputError


def _record(preset: str, tokens: int, strategy: str, intercept: float) -> dict:
    return {"preset": preset, "tokens": tokens, "strategy": strategy, "intercept_us": intercept,
            "per_layer_us": 100.0}


RECORDS = [_record("a", 1, "sequential", 3.0), _record("a", 1, "multi_stream", 9.0),
           _record("a", 2, "sequential", 2.0), _record("a", 2, "multi_stream", 6.0),
           _record("b", 1, "sequential", 4.0), _record("b", 1, "multi_stream", 11.0),
           _record("c", 1, "sequential", 4.0)]  # no multi_stream: left out


def test_excess_is_multi_stream_intercept_minus_sequential_per_point() -> None:
    assert first_fork_excess(RECORDS) == {("a", 1): 6.0, ("a", 2): 4.0, ("b", 1): 7.0}


def test_figure_is_the_median_excess_with_its_spread_in_the_source() -> None:
    figure = first_fork_figure(RECORDS, "run")
    assert figure["value"] == 6.0
    assert "median over 3 points" in figure["source"] and "p10 4.40, p90 6.80" in figure["source"]
    rank = [_record("a@tp2", 1, "sequential", 0.0), _record("a@tp2", 1, "multi_stream", 90.0)]
    held = first_fork_figure([*RECORDS, *rank], "run", ("a",))
    assert held["value"] == 7.0 and "presets held out: ['a']" in held["source"]  # b's point alone
    negative = [_record("a", 1, "sequential", 5.0), _record("a", 1, "multi_stream", 4.0)]
    assert first_fork_figure(negative, "run")["value"] == 0.0
    with pytest.raises(InputError, match="no point with both"):
        first_fork_figure(RECORDS[-1:], "run")


def test_load_reads_a_run_folder_or_its_file(tmp_path) -> None:
    (tmp_path / "replay_lengths.json").write_text(json.dumps({"env": {"device_name": "GPU"}, "records": RECORDS}))
    for where in (tmp_path, tmp_path / "replay_lengths.json"):
        records, env = load_replay_lengths(where)
        assert len(records) == len(RECORDS) and env["device_name"] == "GPU"
    with pytest.raises(InputError, match=r"no replay_lengths\.json"):
        load_replay_lengths(tmp_path / "missing")


def test_calibrate_takes_the_figure_only_from_a_run_of_its_own_gpu(tmp_path) -> None:
    from calibration.fit import with_first_fork
    from simulator.profile import load_profile

    profile = load_profile("h200")
    run = tmp_path / "run"
    run.mkdir()
    for gpu, ok in ((profile.hardware.gpu, True), ("NVIDIA H100 80GB HBM3", False)):
        (run / "replay_lengths.json").write_text(json.dumps({"env": {"device_name": gpu}, "records": RECORDS}))
        if ok:
            fitted = with_first_fork(profile, run, lambda _msg: None)
            assert fitted.host.graph_first_fork_us.value == 6.0
            assert fitted.measurements[-1].endswith("replay_lengths.json")
        else:
            with pytest.raises(InputError, match="not on NVIDIA H200"):
                with_first_fork(profile, run, lambda _msg: None)
