"""kernels_real.routing_counts: the router redrawn without the expert weights routes as the bench's layer does."""

from __future__ import annotations

import gzip
import json

import pytest

torch = pytest.importorskip("torch")

from kernels_real import routing_counts  # noqa: E402
from kernels_real.bench import bench_input, weight_seed  # noqa: E402
from kernels_real.config import get_preset  # noqa: E402
from kernels_real.layer import MoELayer, MoEWeights, router_weights  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["deepseek_v3", "qwen2_57b_a14b"])
def test_redrawn_router_routes_as_the_layer(name: str, device: str) -> None:
    """Gate and bias equal the full weight set's (same seed), and the counts equal those of the layer's own gate
    on the bench's input (biased grouped router and plain softmax router)."""
    cfg = get_preset(name).scaled_down()
    full = MoEWeights.random(cfg, device, seed=weight_seed(1))
    gate, bias = router_weights(cfg, device, weight_seed(1))
    assert torch.equal(gate, full.gate)
    assert (bias is None and full.bias is None) or torch.equal(bias, full.bias)
    layer = MoELayer(cfg, device)
    x = bench_input(cfg, 6, torch.device(device), layer.dtype)
    ids, _ = layer._gate(x, full)
    (record,) = routing_counts.expert_counts(cfg, [1], [6], torch.device(device))
    assert record["counts"] == torch.bincount(ids.flatten(), minlength=cfg.n_experts).tolist()
    assert sum(record["counts"]) == 6 * cfg.top_k


def test_cli_writes_counts_and_rejects_bad_input(tmp_path, capsys) -> None:
    assert routing_counts.main(["--out", str(tmp_path), "--presets", "deepseek_v2_lite@ep2", "--tokens", "1", "3",
                                "--sets", "2", "--device", "cpu"]) == 0
    with gzip.open(tmp_path / "routing.json.gz") as f:
        records = json.load(f)["records"]
    assert [(r["set"], r["tokens"]) for r in records] == [(0, 1), (0, 3), (1, 1), (1, 3)]
    assert all(len(r["counts"]) == get_preset("deepseek_v2_lite@ep2").n_experts for r in records)
    assert json.loads((tmp_path / "env.json").read_text())["backend"] == "cpu"
    assert routing_counts.main(["--out", str(tmp_path / "x"), "--presets", "nope"]) == 2
    assert "unknown MoE preset" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
