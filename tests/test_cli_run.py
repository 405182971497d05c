"""The run / sweep / thresholds / schema commands: --json shapes, tables, traces and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from simulator.cli.main import main as moesim

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
SMALL = {"model": {"preset": "DeepSeek-V2-Lite"}, "platform": {"profile": "mi300x"},
         "parallelism": {"tp": 1, "dp": 2, "ep": 2}, "load": {"concurrency": 4},
         "thresholds": {"concurrency": [1, 8]}}


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def test_run_json_shape(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["run", str(small), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == "small"
    assert out["profile"]["name"] == "mi300x" and out["profile"]["provenance"] == "datasheet"
    assert [r["strategy"] for r in out["results"]] == ["sequential", "multi_stream", "fused_shared"]
    for r in out["results"]:
        assert {"strategy", "moe_layer_us", "step_us", "gain_vs_sequential"} <= set(r)
    seq, ms = out["results"][0], out["results"][1]
    assert seq["gain_vs_sequential"] == 0.0
    assert ms["gain_vs_sequential"] == pytest.approx((seq["step_us"] - ms["step_us"]) / seq["step_us"], abs=1e-5)


def test_run_table_says_where_figures_come_from(capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["run", str(SCENARIOS / "dsv3_mi300x_tp8.yaml")]) == 0
    out = capsys.readouterr().out
    assert "DATASHEET" in out and "multi_stream" in out and "gain vs sequential" in out


@pytest.mark.parametrize("name", ["dsv3_h200_dp8", "dsv3_h200_tp8", "qwen2_57b_h200_tp4"])
def test_h200_scenarios_say_calibrated_kernels_and_datasheet_link(name: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["run", str(SCENARIOS / f"{name}.yaml")]) == 0
    out = capsys.readouterr().out
    assert "h200 (calibrated on NVIDIA H200" in out and "DATASHEET" not in out
    link_line = next(line for line in out.splitlines() if line.startswith("link"))
    assert "NOT measured" in link_line and "450 GB/s" in link_line


def test_link_source_follows_overrides_and_a_fitted_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((SCENARIOS / "dsv3_h200_dp8.yaml").read_text())
    doc["platform"] = {"profile": "h200", "link_bandwidth_GBps": 100.0}
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump(doc))
    assert moesim(["run", str(over), "--json"]) == 0
    link = json.loads(capsys.readouterr().out)["link"]
    assert link["bandwidth_GBps"] == 100.0 and link["latency_us"] == 5.0
    assert link["source"].startswith("bandwidth set in the scenario") and "NOT measured" in link["source"]
    profile = json.loads((SCENARIOS.parent / "simulator" / "profiles" / "h200.json").read_text())
    profile["fit"]["link"] = {"joint": {"bandwidth_GBps": 300.0}}
    profile["link"]["bandwidth_GBps"]["value"] = 300.0
    (tmp_path / "fitted.json").write_text(json.dumps(profile))
    doc["platform"] = {"profile": str(tmp_path / "fitted.json")}
    over.write_text(yaml.safe_dump(doc))
    assert moesim(["run", str(over)]) == 0
    assert "link (collectives): 300 GB/s per direction, 5 µs per collective (measured" in capsys.readouterr().out


def test_thresholds_on_h200_give_settings_with_calibrated_provenance(capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["thresholds", str(SCENARIOS / "dsv3_h200_tp8.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"].startswith("h200 (calibrated") and "NOT measured" in out["link"]
    assert out["settings"] and out["counterpart"]["layout"] == "TP1 DP8 EP8"


def test_run_trace_out_has_one_process_per_strategy(small: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.json"
    assert moesim(["run", str(small), "--trace-out", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
    assert len(names) == 3 and any(n.startswith("multi_stream") for n in names)
    kernels = {e["name"] for e in events if e.get("cat") == "kernel"}
    assert {"decode_attention", "dispatch", "combine", "shared_gemm_down"} <= kernels
    flow_ids = [e["id"] for e in events if e.get("ph") == "s"]
    assert len(flow_ids) == len(set(flow_ids))


def test_sweep_json_shape(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["sweep", str(small), "--set", "load.concurrency=1,8", "--set", "parallelism.tp=1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["params"] for c in out["cases"]] == [{"load.concurrency": 1, "parallelism.tp": 1},
                                                  {"load.concurrency": 8, "parallelism.tp": 1}]
    assert {"strategy", "moe_layer_us", "step_us", "gain_vs_sequential"} <= set(out["cases"][0]["results"][0])


def test_sweep_table(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["sweep", str(small), "--set", "load.concurrency=2,4"]) == 0
    out = capsys.readouterr().out
    assert "DATASHEET" in out and out.count("\n") >= 4


def test_thresholds_json_and_table(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["thresholds", str(small), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"] and out["settings"][0].startswith(("VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD=",
                                                              "VLLM_DISABLE_SHARED_EXPERTS_STREAM=1"))
    assert len(out["curve"]["points"]) == 2
    assert moesim(["thresholds", str(small)]) == 0
    assert "recommended settings" in capsys.readouterr().out


def test_schema_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert moesim(["schema"]) == 0
    assert "properties" in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv", [
    ["run", "missing.yaml"],
    ["sweep", "{small}", "--set", "load.concurrency"],
    ["sweep", "{small}", "--set", "load.concurrency=1", "--executor", "http://x"],
    ["run", "{bad}"],
])
def test_bad_input_is_one_line_exit_2(argv: list[str], small: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SMALL, "load": {"concurrency": "lots"}}))
    trace = tmp_path / "never.json"
    argv = [a.format(small=small, bad=bad) for a in argv] + (["--trace-out", str(trace)] if argv[0] == "run" else [])
    assert moesim(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "error:" in captured.err
    assert not trace.exists()
