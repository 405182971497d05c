"""kernels_real.replay_length_probe: graphs of N layer calls, µs per replay split into once-per-replay and
per-layer parts."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from kernels_real import replay_length_probe as probe  # noqa: E402


def test_line_fit_recovers_intercept_and_slope() -> None:
    # 7 µs once per replay, 100 µs per layer: 407, 807, 1607 µs at N = 4, 8, 16
    fit = probe.line_fit([4, 8, 16], [407.0, 807.0, 1607.0])
    assert fit["intercept_us"] == pytest.approx(7.0)
    assert fit["per_layer_us"] == pytest.approx(100.0)
    assert fit["max_residual_us"] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError):
        probe.line_fit([4, 4], [400.0, 401.0])


def test_table_reports_the_multi_stream_excess_and_both_gains() -> None:
    base = {"preset": "p", "tokens": 1, "layers_per_replay": [4, 8]}
    seq = base | {"strategy": "sequential", "median_us_per_replay": [402.0, 802.0], "intercept_us": 2.0,
                  "per_layer_us": 100.0}
    ms = base | {"strategy": "multi_stream", "median_us_per_replay": [372.0, 732.0], "intercept_us": 12.0,
                 "per_layer_us": 90.0}
    row = probe.table([seq, ms]).splitlines()[1]
    cells = [c.strip() for c in row.split("|")]
    assert cells[4] == "12.0" and cells[5] == "10.0"  # ms once, ms once - seq once
    assert cells[6] == "+7.5%" and cells[7] == "+10.0%"  # 1 - 372/402; 1 - 90/100


def test_bad_input_is_one_line(capsys, tmp_path) -> None:
    assert probe.main(["--out", str(tmp_path), "--presets", "nope"]) == 2
    assert "unknown MoE preset" in capsys.readouterr().err
    assert probe.main(["--out", str(tmp_path), "--repeats", "2", "2"]) == 2
    assert "two distinct" in capsys.readouterr().err
    assert not (tmp_path / "replay_lengths.json").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_probe_writes_a_fit_per_strategy(tmp_path) -> None:
    assert probe.main(["--out", str(tmp_path), "--presets", "deepseek_v2_lite@tp4", "--tokens", "1",
                       "--repeats", "1", "2", "--rounds", "3"]) == 0
    doc = json.loads((tmp_path / "replay_lengths.json").read_text())
    assert [r["strategy"] for r in doc["records"]] == ["sequential", "multi_stream"]
    assert all(r["per_layer_us"] > 0 for r in doc["records"])
