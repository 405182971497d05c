"""calibration.microbench.dispatch_probe: the router stand-in's block records summarised by hand; the probe on a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from calibration.microbench import dispatch_probe  # noqa: E402


def test_block_stats_by_hand() -> None:
    """Four blocks on SMs 3, 3, 7, 9 starting at 0, 0.5, 1 and 5 µs, each running 2 µs except the last (1 µs)."""
    rec = torch.tensor([[3, 1000, 3000], [3, 1500, 3500], [7, 2000, 4000], [9, 6000, 7000]])
    stats = dispatch_probe.block_stats(rec)
    assert stats == {"span_us": 6.0, "sms": 3, "max_per_sm": 2, "late": 1, "block_us": 2.0}


def test_bad_input_is_one_line(capsys) -> None:
    assert dispatch_probe.main(["--out", "/tmp/x", "--shared", "nope"]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or bool(torch.version.hip), reason="needs a CUDA GPU")
def test_one_case_on_gpu() -> None:
    pytest.importorskip("triton")
    out = dispatch_probe.measure_case(7168, 512, dispatch_probe.ROUTERS["llama4_maverick"], torch.cuda.Stream(),
                                      dispatch_probe.standin_kernel())
    assert set(out) == {"S", "R", "S|R", "S|~R", "R|S", "Rc", "S|Rc", "S|~Rc", "Rc|S"}
    assert all(v["us"] > 0 for v in out.values())
    assert 1 <= out["R"]["sms"] <= 64 and out["R"]["span_us"] > 0
