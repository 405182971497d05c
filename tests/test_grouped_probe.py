"""kernels_real.grouped_probe: one grouped GEMM call timed on weights that differ only in their values."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernels_real import grouped_probe  # noqa: E402


def test_variants_hold_the_same_shape_in_two_layouts() -> None:
    w13 = torch.randn(3, 8, 16)  # [E, 2I, H]
    out = grouped_probe.variant_weights(w13, hidden=16)
    assert list(out) == list(grouped_probe.VARIANTS)
    assert all(tuple(b.shape) == (3, 16, 8) for b in out.values())
    assert torch.equal(out["layer"], w13.transpose(1, 2))
    assert out["microbench"].is_contiguous() and not out["scaled"].is_contiguous()
    assert out["scaled"].std() < 0.5 < out["unscaled"].std()  # hidden^-1/2 = 0.25


def test_bad_input_is_one_line(capsys) -> None:
    assert grouped_probe.main(["--out", "/tmp/x", "--presets", "nope"]) == 2
    assert "unknown MoE preset" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_times_every_variant_on_gpu() -> None:
    record = grouped_probe.time_point("deepseek_v2_lite", 1, reps=2, device=torch.device("cuda"))
    assert record["experts_hit"] == 6
    assert set(record["median_us"]) == set(grouped_probe.VARIANTS) and min(record["median_us"].values()) > 0
