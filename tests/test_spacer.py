"""The router-delay knob and its probe: ``benchmarks/spacer_table.py`` on hand-made records (gains by hand, a loss
turned into a gain), ``kernels_real.spacer_probe`` refusing without a GPU and its own gains table, and the layer
refusing a negative delay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark


def _records(routed_first: bool = False) -> list[dict[str, object]]:
    rows = [("sequential", 0, 0, 100.0), ("sequential", 0, 1, 102.0), ("multi_stream", 0, 0, 105.0),
            ("multi_stream", 0, 1, 107.0), ("multi_stream", 2000, 0, 96.0), ("multi_stream", 2000, 1, 98.0)]
    out = [{"preset": "p", "tokens": 2, "strategy": s, "router_delay_cycles": d, "capture": k, "median_us": us}
           for s, d, k, us in rows]
    if routed_first:  # the other capture order: 99 and 101 µs
        out += [{"preset": "p", "tokens": 2, "strategy": "multi_stream", "router_delay_cycles": 0,
                 "shared_first": False, "capture": k, "median_us": us} for k, us in ((0, 99.0), (1, 101.0))]
    return out


def test_gains_by_hand_and_a_loss_turned(tmp_path: Path) -> None:
    table = load_benchmark("spacer_table")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "cases.json").write_text(json.dumps(_records()))
    found = table.points(table.load(tmp_path))
    assert found[0]["sequential_us"] == 101.0
    assert found[0]["gains"]["0"] == pytest.approx(1 - 106 / 101, abs=1e-5)  # a loss
    assert found[0]["gains"]["2000"] == pytest.approx(1 - 97 / 101, abs=1e-5)  # a gain
    text = table.markdown(found, [tmp_path])
    assert "loses (more than 0.5 %) at 1 of 1 points; a variant turns 1 of them into a gain" in text
    # regret against the best here (the delay: 1 - 97/101 = 3.96 points): sequential 3.96, no delay 3.96 + 4.95
    assert "- always sequential: 3.96 / 3.96" in text
    assert "- always multi_stream, no delay: 8.91 / 8.91" in text
    assert "- always multi_stream, delay 2000: 0.00 / 0.00" in text


def test_the_other_capture_order_is_its_own_column(tmp_path: Path) -> None:
    table = load_benchmark("spacer_table")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "cases.json").write_text(json.dumps(_records(routed_first=True)))
    found = table.points(table.load(tmp_path))
    assert list(found[0]["gains"]) == ["0", "2000", "routed first"]
    assert found[0]["gains"]["routed first"] == pytest.approx(1 - 100 / 101, abs=1e-5)
    assert "| p | 2 | -5.0 % | +4.0 % | +1.0 % |" in table.markdown(found, [tmp_path])


def test_a_folder_without_cases_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_benchmark("spacer_table").main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_probe_refuses_without_a_gpu_and_tabulates_by_hand(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    from kernels_real.spacer_probe import gains_table, main

    if not torch.cuda.is_available():
        assert main(["--out", str(tmp_path / "out")]) == 2
        assert "needs a CUDA/ROCm device" in capsys.readouterr().err
        assert not (tmp_path / "out").exists()
    # per capture against the mean sequential 101 µs: 1 - 105/101, 1 - 107/101; 1 - 96/101, 1 - 98/101
    assert "| p | 2 | -4.0 % -5.9 % | +5.0 % +3.0 % |" in gains_table(_records())


def test_the_layer_refuses_a_negative_delay() -> None:
    pytest.importorskip("torch")
    from kernels_real.config import ConfigError, get_preset
    from kernels_real.layer import MoELayer

    with pytest.raises(ConfigError, match="router_delay_cycles"):
        MoELayer(get_preset("deepseek_v3").scaled_down(), router_delay_cycles=-1)
