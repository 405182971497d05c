"""The distributed benches: record builders by hand, a world-of-one CPU run of each, bad input."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from kernels_real.distributed import bench_collectives, bench_layers  # noqa: E402
from kernels_real.distributed.timing import rank_summary  # noqa: E402


def test_wire_bytes_follow_the_ring_and_even_all_to_all_formulas() -> None:
    assert bench_collectives.wire_bytes("all_reduce", 2, 1000) == 1000  # 2·1/2·B
    assert bench_collectives.wire_bytes("all_reduce", 8, 1000) == 1750  # 2·7/8·B
    assert bench_collectives.wire_bytes("all_to_all", 8, 1000) == 875  # 7/8·B
    with pytest.raises(ValueError):
        bench_collectives.wire_bytes("broadcast", 2, 1)


def test_rank_summary_reports_the_slowest_rank() -> None:
    s = rank_summary([[3.0, 1.0, 2.0], [4.0, 7.0, 5.0, 6.0]])
    assert (s["median_us"], s["min_us"], s["p90_us"], s["mean_us"]) == (5.5, 4.0, 7.0, 5.5)
    assert (s["rank_medians_us"], s["replays"], s["ranks"]) == ([2.0, 5.5], 3, 2)


def test_collective_records() -> None:
    r = bench_collectives.time_record("all_to_all", 4, 4096, "bfloat16", [[10.0, 12.0], [11.0, 13.0]], "cuda_events")
    assert (r["wire_bytes"], r["median_us"], r["world"], r["timer"]) == (3072.0, 12.0, 4, "cuda_events")
    sm = bench_collectives.sm_record("all_reduce", 2, 1 << 20, [100.0, 100.0], [125.0, 110.0], [True, True], 9,
                                     {"op": "probe"})
    assert sm["sm_share"] == pytest.approx(0.2)  # 1 − 100/125, the slower rank
    assert sm["rank_sm_shares"] == pytest.approx([0.2, 1 - 100 / 110])
    assert (sm["probe_during_us"], sm["covered"], sm["collectives_per_probe"]) == (125.0, True, 9)
    assert not bench_collectives.sm_record("all_reduce", 2, 1, [1.0, 1.0], [2.0, 2.0], [True, False], 3, {})[
        "covered"]


def test_layer_record_and_gain_table() -> None:
    def rec(strategy: str, us: float) -> dict:
        return bench_layers.layer_record("deepseek_v3", "dp_ep", 8, 16, strategy, "graph", "padded", [[us], [us - 1]],
                                         "grouped_mm", "nccl", "cuda")
    seq, ms = rec("sequential", 100.0), rec("multi_stream", 90.0)
    assert (seq["median_us"], seq["rank_medians_us"], seq["timer"], seq["world"]) == (
        100.0, [100.0, 99.0], "cuda_events", 8)
    table = bench_layers.gains_markdown([seq, ms], {"world": 8, "comm_backend": "nccl"})
    assert "| deepseek_v3 | dp_ep/padded | graph | 16 | 100.0 | 90.0 | +10.0 |" in table


@pytest.fixture
def single_rank_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No torchrun variables (init makes a group of one) and restored afterwards."""
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "NCCL_NVLS_ENABLE"):
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("MASTER_PORT", str(s.getsockname()[1]))


def test_bench_layers_group_of_one_on_cpu(single_rank_env: None, tmp_path: Path) -> None:
    rc = bench_layers.main(["--out", str(tmp_path), "--device", "cpu", "--quick", "--presets", "deepseek_v2_lite",
                            "qwen3_30b_a3b", "--tokens", "2"])
    assert rc == 0
    cases = json.loads((tmp_path / "cases.json").read_text())
    got = sorted((c["preset"], c["parallel"], c["strategy"], c["mode"]) for c in cases)
    want = sorted([("deepseek_v2_lite-tiny", p, s, "eager") for p in ("tp", "dp_ep")
                   for s in ("sequential", "multi_stream")]
                  + [("qwen3_30b_a3b-tiny", p, "sequential", "eager") for p in ("tp", "dp_ep")])
    assert got == want
    assert all(c["world"] == 1 and c["median_us"] > 0 and c["comm_backend"] == "gloo" for c in cases)
    env = json.loads((tmp_path / "env.json").read_text())
    assert (env["NCCL_NVLS_ENABLE"], env["world"]) == ("0", 1)
    assert "| deepseek_v2_lite-tiny | tp | eager | 2 |" in (tmp_path / "gains.md").read_text()


def test_bench_collectives_group_of_one_on_cpu(single_rank_env: None, tmp_path: Path) -> None:
    rc = bench_collectives.main(["--out", str(tmp_path), "--device", "cpu", "--quick", "--sizes", "1024", "4096"])
    assert rc == 0
    doc = json.loads((tmp_path / "collectives.json").read_text())
    assert doc["schema"] == bench_collectives.SCHEMA and doc["sm"] == []  # no SM probe on CPU
    keys = sorted((r["collective"], r["bytes"]) for r in doc["times"])
    assert keys == [("all_reduce", 1024), ("all_reduce", 4096), ("all_to_all", 1024), ("all_to_all", 4096)]
    assert all(r["wire_bytes"] == 0 and r["timer"] == "perf_counter" for r in doc["times"])


@pytest.mark.parametrize(("module", "argv", "message"), [
    (bench_layers, ["--parallel", "pp"], "unknown parallel 'pp'"),
    (bench_layers, ["--tokens", "0"], "token counts must be >= 1"),
    (bench_layers, ["--presets", "gpt5"], "unknown MoE preset 'gpt5'"),
    (bench_collectives, ["--sizes", "0"], "message sizes must be >= 1"),
])
def test_bad_input_is_one_line_and_exit_2(module, argv: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert module.main(["--out", str(out), "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()
