"""``whatif trace``: region moves to aux with fork/join, hand-computed timelines, join placement, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main as cli_main
from simulator.errors import InputError
from simulator.kineto.replay import run_whatif
from tests.data.kineto.synth import Synth, moe_layer

PROFILE = str(Path(__file__).parent / "data" / "kineto" / "test-profile.json")


def _cli(*argv: str) -> int:
    return cli_main.main(list(argv))


def test_eager_whatif_matches_hand_timeline(moe_trace: Path) -> None:
    # Traced: gate 3..13, shared 14..44, 45..75, routed 76..116, 117..157, combine 158..163: span 160.
    # What-if (sim clock = trace - 1002; host costs record/wait/switch 1 µs; gap 1; launch latency 3):
    # gate 1..11; fork: 3 µs of host calls before shared_up, issued at 8, waits gate -> 12..42; shared_down
    # issued 13 -> 43..73; join record + switch back (2 µs): routed_up issued 20 -> 21..61, routed_down
    # 62..102; wait (1 µs): combine issued 31, waits routed_down and the join -> 103..108. Span 107.
    out = run_whatif(moe_trace, "moe.shared_experts", profile=PROFILE, progress=False).to_json_dict()
    assert out["measured_us"] == pytest.approx(160.0)
    assert out["baseline_us"] == pytest.approx(160.0)
    assert out["whatif_us"] == pytest.approx(107.0)
    assert out["kernels"] == 6 and out["moved_kernels"] == 2 and out["region_instances"] == 1


def test_graph_whatif_matches_hand_timeline(moe_trace: Path) -> None:
    # One replay (10 µs host), node gap 0.5: sequential 10.5 + 155 of kernels + 5 gaps = span 157.5.
    # What-if: gate 10.5..20.5; shared 21..51, 51.5..81.5 on aux; routed 21..61, 61.5..101.5; combine
    # 102..107: span 96.5.
    out = run_whatif(moe_trace, "moe.shared_experts", launch="graph", profile=PROFILE,
                     progress=False).to_json_dict()
    assert out["baseline_us"] == pytest.approx(157.5)
    assert out["whatif_us"] == pytest.approx(96.5)


def test_join_after_places_wait_after_that_range(tmp_path: Path) -> None:
    s = Synth()
    with s.range("moe.shared_experts"):
        s.launch("shared", 100.0)
    with s.range("moe.routed_experts"):
        s.launch("routed", 10.0)
    with s.range("post"):
        s.launch("post_kernel", 10.0)
    s.launch("combine", 5.0)
    path = tmp_path / "t.json"
    path.write_text(s.dumps())
    default = run_whatif(path, "moe.shared_experts", profile=PROFILE, progress=False)
    early = run_whatif(path, "moe.shared_experts", join_after="moe.routed_experts", profile=PROFILE,
                       progress=False)
    starts = {k.name: k.start_us for k in default.whatif.kernels}
    ends = {k.name: k.end_us for k in default.whatif.kernels}
    # default join: before combine (post is inside another range), so post_kernel runs under shared
    assert starts["post_kernel"] < ends["shared"] <= starts["combine"]
    starts = {k.name: k.start_us for k in early.whatif.kernels}
    ends = {k.name: k.end_us for k in early.whatif.kernels}
    assert starts["post_kernel"] >= ends["shared"]
    with pytest.raises(InputError, match="--join-after"):
        run_whatif(path, "moe.routed_experts", join_after="moe.shared_experts", profile=PROFILE, progress=False)


def test_earlier_consumer_by_shape_joins_before_it(tmp_path: Path) -> None:
    s = Synth()
    with s.range("router"), s.op("aten::mm", [[16, 128], [128, 64]]):
        s.launch("router_gemm", 50.0)
    with s.range("moe.routed_experts"):
        with s.op("aten::relu", [[16, 32]]):
            s.launch("unrelated", 10.0)
        with s.op("aten::topk", [[16, 64]]):
            s.launch("topk", 10.0)
    s.launch("combine", 5.0)
    path = tmp_path / "t.json"
    path.write_text(s.dumps())
    report = run_whatif(path, "router", profile=PROFILE, progress=False)
    assert any("joined early" in n and "[16, 64]" in n for n in report.notes)
    k = {r.name: r for r in report.whatif.kernels}
    assert k["unrelated"].start_us < k["router_gemm"].end_us <= k["topk"].start_us


def test_hidden_shaped_region_output_is_not_a_consumer_signal(moe_trace: Path) -> None:
    report = run_whatif(moe_trace, "moe.shared_experts", profile=PROFILE, progress=False)
    assert not any("joined early" in n for n in report.notes)
    # (the synthetic trace records no shapes at all: the what-if says so)
    assert [n for n in report.notes if "joined early" not in n] == \
        [n for n in report.notes if n.startswith("no GEMM kernel of the trace carries its operator's shapes")]


def test_every_instance_moves(tmp_path: Path) -> None:
    s = Synth()
    moe_layer(s)
    moe_layer(s)
    path = tmp_path / "two.json"
    path.write_text(s.dumps())
    out = run_whatif(path, "moe.shared_experts", profile=PROFILE, progress=False).to_json_dict()
    assert out["region_instances"] == 2 and out["moved_kernels"] == 4
    assert out["baseline_us"] == pytest.approx(out["measured_us"])
    assert out["whatif_us"] < out["baseline_us"]


def test_cli_json_and_trace_out(moe_trace: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "pred.json"
    rc = _cli("whatif", "trace", str(moe_trace), "--aux-region", "moe.shared_experts",
              "--profile", PROFILE, "--json", "--trace-out", str(out_file))
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"baseline_us", "whatif_us", "measured_us", "kernels"} <= set(doc)
    assert doc["whatif_us"] == pytest.approx(107.0)
    timeline = json.loads(out_file.read_text())
    names = [e["args"]["name"] for e in timeline["traceEvents"] if e.get("name") == "thread_name"]
    assert "stream aux" in names
    kernels = [e for e in timeline["traceEvents"] if e.get("cat") == "kernel"]
    # on the trace's clock: the gate kernel starts where it started in the real trace
    assert min(e["ts"] for e in kernels) == pytest.approx(1003.0)


def test_cli_text_names_sources(moe_trace: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli("whatif", "trace", str(moe_trace), "--aux-region", "moe.shared_experts",
                "--profile", PROFILE) == 0
    text = capsys.readouterr().out
    assert "kineto-test" in text and "from the trace" in text


def test_cli_fits_the_host_to_a_measured_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Host-bound: launches every 5 + 20 µs of a 2 µs kernel, a shared range in the middle, span 3 × 25 + 2 =
    77 µs as traced; told it took 32 µs without the profiler, the host time between submissions is scaled by
    (32 − 2) / 75 = 0.4."""
    s = Synth()
    for i in range(4):
        with s.range("moe.shared_experts" if i == 1 else "other"):
            s.launch(f"k{i}", 2.0)
        s.idle(20.0)
    path = tmp_path / "host.json"
    path.write_text(s.dumps())
    assert _cli("whatif", "trace", str(path), "--aux-region", "moe.shared_experts", "--profile", PROFILE,
                "--measured-us", "32", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["measured_us"] == pytest.approx(77.0) and doc["baseline_us"] == pytest.approx(32.0, abs=1e-4)
    assert doc["host_scale"] == pytest.approx(0.4, abs=1e-6) and "32.000 µs per layer" in doc["sources"]["host"]


def test_measured_time_below_the_traced_kernels_is_reported(moe_trace: Path) -> None:
    """The hand timeline's kernels run back to back (160 µs): no host scaling reaches 120 µs."""
    report = run_whatif(moe_trace, "moe.shared_experts", profile=PROFILE, measured_layer_us=120.0, progress=False)
    assert report.baseline_us == pytest.approx(160.0)
    assert any("kernels alone last longer than the measured 120.000 µs" in note for note in report.notes)


@pytest.mark.parametrize("argv, message", [
    (["--aux-region", "nope"], "no record_function range named 'nope'"),
    (["--aux-region", "moe.shared_experts", "--launch", "graph", "--measured-us", "100"],
     "needs --launch as-traced"),
    (["--aux-region", "moe.shared_experts", "--durations-from", "/nonexistent/trace.json"], "/nonexistent"),
    (["--aux-region", "moe.shared_experts", "--profile", "no-such-profile"], "unknown profile"),
])
def test_cli_bad_input_exit_2(moe_trace: Path,
                              capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    extra = [] if "--profile" in argv else ["--profile", PROFILE]
    assert _cli("whatif", "trace", str(moe_trace), *argv, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_cli_malformed_trace_exit_2_writes_nothing(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", ')
    out_file = tmp_path / "pred.json"
    assert _cli("whatif", "trace", str(bad), "--aux-region", "x", "--trace-out", str(out_file)) == 2
    err = capsys.readouterr().err.strip()
    assert "malformed trace JSON" in err and len(err.splitlines()) == 1
    assert not out_file.exists()


def test_profile_is_chosen_by_traced_gpu(moe_trace: Path) -> None:
    report = run_whatif(moe_trace, "moe.shared_experts", progress=False)
    assert "H200" in report.profile.hardware.gpu
