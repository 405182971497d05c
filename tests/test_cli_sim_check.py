"""The sim/check CLI as a user runs it: JSON shapes, exit codes, Perfetto output, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "scenarios" / "programs"


def moesim(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_sim_json_shape_and_trace(tmp_path):
    trace = tmp_path / "sim.json"
    out = moesim("sim", str(PROGRAMS / "event_pair_fork_join.yaml"), "--json", "--trace-out", str(trace))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"makespan_us", "kernels", "streams"}
    assert {k["stream"] for k in doc["kernels"]} == {"main", "aux"}
    assert all(set(k) >= {"name", "stream", "start_us", "end_us"} for k in doc["kernels"])
    assert set(doc["streams"]["aux"]) == {"busy_us"}
    assert doc["makespan_us"] == max(k["end_us"] for k in doc["kernels"])
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"host", "stream main", "stream aux"}
    kernels = [e for e in events if e["ph"] == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == len(doc["kernels"])
    assert all(e["dur"] >= 0 and isinstance(e["ts"], float) for e in kernels)
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    assert all(ends[i]["ts"] >= starts[i]["ts"] and ends[i]["tid"] != starts[i]["tid"] for i in starts)
    assert any(e["ph"] == "X" and e.get("cat") == "host" for e in events)


def test_sim_is_byte_identical_across_runs():
    a = moesim("sim", str(PROGRAMS / "event_pair_fork_join.yaml"), "--json").stdout
    b = moesim("sim", str(PROGRAMS / "event_pair_fork_join.yaml"), "--json").stdout
    assert a == b and a


@pytest.mark.parametrize(("name", "code"), [
    ("event_pair_fork_join.yaml", 0), ("seed003_lazy_switch_fixed.yaml", 0), ("seed000_alias_fixed.yaml", 0),
    ("seed003_lazy_switch_race.yaml", 1), ("seed000_alias_race.yaml", 1), ("capture_unjoined.yaml", 1),
])
def test_check_exit_codes(name, code):
    out = moesim("check", str(PROGRAMS / name), "--json")
    assert out.returncode == code, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"hazards", "capture_errors"}
    for h in doc["hazards"]:
        assert set(h) >= {"kind", "buffer", "first", "second"}
        assert set(h["first"]) >= {"kernel", "stream"}
    for e in doc["capture_errors"]:
        assert set(e) >= {"kind", "graph", "stream"}


BAD = {
    "malformed.yaml": "streams: {main: {}\nops: [",
    "malformed.json": '{"streams": {"main": {}}, "ops": [',
    "negative.yaml": "streams: {main: {}}\nops:\n  - launch: {kernel: k, stream: main, dur_us: -1}\n",
    "unknown_key.yaml": "streams: {main: {}}\nops:\n  - launch: {kernel: k, stream: main, dur_us: 1, speed: 2}\n",
    "wrong_type.yaml": "streams: {main: {}}\nops:\n  - launch: {kernel: k, stream: main, dur_us: fast}\n",
    "undeclared.yaml": "streams: {main: {}}\nops:\n  - launch: {kernel: k, stream: aux, dur_us: 1}\n",
    "unknown_op.yaml": "streams: {main: {}}\nops:\n  - lunch: {kernel: k}\n",
    "replay.yaml": "streams: {main: {}}\nops:\n  - replay: {graph: g}\n",
    "bad_kind.yaml": "streams: {main: {kind: fast}}\nops: []\n",
    "not_mapping.yaml": "- 1\n- 2\n",
}
EXPECT = {
    "negative.yaml": "ops[0].launch.dur_us", "unknown_key.yaml": "ops[0].launch.speed",
    "wrong_type.yaml": "ops[0].launch.dur_us", "undeclared.yaml": "undeclared stream 'aux'",
    "replay.yaml": "never captured", "malformed.yaml": "malformed YAML", "malformed.json": "malformed JSON",
    "bad_kind.yaml": "streams.main.kind",
}


@pytest.mark.parametrize("command", ["sim", "check"])
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, command, name):
    path = tmp_path / name
    path.write_text(BAD[name])
    trace = tmp_path / "out.json"
    extra = ["--trace-out", str(trace)] if command == "sim" else []
    out = moesim(command, str(path), *extra)
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr
    assert EXPECT.get(name, "") in out.stderr
    assert not trace.exists()


def test_missing_file():
    out = moesim("sim", "/nonexistent/program.yaml")
    assert out.returncode == 2 and "no such file" in out.stderr and len(out.stderr.splitlines()) == 1


def test_trace_out_into_missing_folder_is_input_error(tmp_path):
    out = moesim("sim", str(PROGRAMS / "event_pair_fork_join.yaml"), "--trace-out", str(tmp_path / "no" / "t.json"))
    assert out.returncode == 2 and "does not exist" in out.stderr
