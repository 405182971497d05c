"""GPU tests of the real MoE layer (skipped without a GPU): strategies, CUDA graphs, the CUDA sanitizer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernels_real.config import get_preset  # noqa: E402
from kernels_real.layer import MoELayer, MoEWeights  # noqa: E402
from kernels_real.reference import reference_forward  # noqa: E402
from kernels_real.streams import current_stream, platform_info, reset_current_stream  # noqa: E402
from simulator.workloads.presets import PRESETS  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.double().cpu() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("name", list(PRESETS))
def test_strategies_match_float64_reference_on_gpu(name: str) -> None:
    cfg = get_preset(name).scaled_down()
    layer = MoELayer(cfg, "cuda")
    w = MoEWeights.random(cfg, "cuda", seed=11)
    x = torch.randn(48, cfg.hidden, device="cuda", dtype=layer.dtype)
    ref = reference_forward(cfg, x, w)
    for strategy in ("sequential", "multi_stream", "fused_shared"):
        if cfg.applicable(strategy) is None:
            assert _rel_err(layer(x, w, strategy), ref) < 1.5e-2, strategy


def test_hopper_uses_grouped_mm_and_padded_path_agrees() -> None:
    cfg = get_preset("deepseek_v2_lite")  # real shapes, 64 tokens
    layer = MoELayer(cfg, "cuda")
    if torch.version.hip is None and torch.cuda.get_device_capability() >= (9, 0):
        assert layer.backend == "grouped_mm"
    w = MoEWeights.random(cfg, "cuda", seed=5)
    x = torch.randn(64, cfg.hidden, device="cuda", dtype=layer.dtype)
    fast = layer(x, w, "sequential").float()
    portable = MoELayer(cfg, "cuda", backend="padded_bmm")(x, w, "sequential").float()
    fused = layer(x, w, "fused_shared").float()
    multi = layer(x, w, "multi_stream").float()
    scale = fast.norm()
    for other in (portable, fused, multi):
        assert ((other - fast).norm() / scale).item() < 1e-2


def test_multi_stream_graph_capture_replays_like_eager() -> None:
    cfg = get_preset("deepseek_v3").scaled_down()
    layer = MoELayer(cfg, "cuda")
    w = MoEWeights.random(cfg, "cuda", seed=2)
    x = torch.randn(16, cfg.hidden, device="cuda", dtype=layer.dtype)
    eager = layer(x, w, "multi_stream").clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer(x, w, "multi_stream", ubatch=1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer(x, w, "multi_stream", ubatch=1)
    x2 = torch.randn_like(x)
    x.copy_(x2)
    graph.replay()
    torch.cuda.synchronize()
    expected = layer(x2, w, "multi_stream")
    assert not torch.equal(out, eager)  # the replay really recomputed from the new input
    torch.testing.assert_close(out.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_lazy_current_stream_waits_on_previous_stream() -> None:
    before = torch.cuda.current_stream()
    stream = current_stream(safe=True)
    try:
        assert torch.cuda.current_stream() == stream != before
        assert current_stream() is stream  # created once
    finally:
        reset_current_stream()
    assert torch.cuda.current_stream() == before


def test_platform_is_recorded() -> None:
    info = platform_info(torch.device("cuda"))
    assert info["backend"] == ("hip" if torch.version.hip else "cuda")
    assert info["rocm_tested"] is False


def _sanitized(case: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"TORCH_CUDA_SANITIZER": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kernels_real.race_demo", case], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("case", "race"), [("multi_stream", False), ("inplace_race", True),
                                            ("lazy_safe", False), ("lazy_unsafe", True)])
def test_cuda_sanitizer(case: str, race: bool) -> None:
    proc = _sanitized(case)
    detected = "CSAN detected a possible data race" in proc.stderr
    assert detected == race, proc.stderr[-3000:]
    assert (proc.returncode == 0) == (not race), proc.stderr[-3000:]
