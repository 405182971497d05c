"""``kernels_real.layout_probe``: its table from hand-made records, and a clean one-line refusal without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernels_real import layout_probe  # noqa: E402


def test_table_gives_each_layouts_gain_and_the_aa_spread() -> None:
    times = {("sequential", 0, 0): 100.0, ("sequential", 0, 1): 104.0, ("sequential", 1, 0): 100.0,
             ("sequential", 1, 1): 100.0, ("multi_stream", 0, 0): 90.0, ("multi_stream", 0, 1): 104.0,
             ("multi_stream", 1, 0): 99.0, ("multi_stream", 1, 1): 90.0}
    records = [{"preset": "p", "tokens": 1, "strategy": s, "weights_copy": c, "capture": k, "median_us": us}
               for (s, c, k), us in times.items()]
    # gains 10 %, 0 %, 1 %, 10 %; A/A: 104/100 - 1 = 4.0 %, 104/90 - 1 = 15.6 %
    assert "| p | 1 | +10.0 % +0.0 % +1.0 % +10.0 % | 4.0 % / 15.6 % |" in layout_probe.gains_table(records)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_it_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert layout_probe.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_copies_that_do_not_fit_become_captures_of_one_copy() -> None:
    two_by_two = layout_probe.Layouts(2, 2)
    assert layout_probe.fitted(two_by_two, 10e9, 3, 100e9) == two_by_two  # 60 GB of 85 GB usable
    assert layout_probe.fitted(two_by_two, 20e9, 3, 100e9) == layout_probe.Layouts(1, 4)  # 120 GB do not fit


def test_preset_error_names_the_first_unknown_preset() -> None:
    from kernels_real.config import preset_error

    assert preset_error(["deepseek_v3", "llama4_scout@ep8"]) is None
    error = preset_error(["deepseek_v3", "no_such_model", "nor_this"])
    assert error is not None and "no_such_model" in error and "nor_this" not in error
