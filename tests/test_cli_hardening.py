"""Issue 17, through the real ``moesim`` entry point: every class of bad input is one line on stderr, exit code 2,
nothing on stdout and no file written; outputs are checked before the work; and the consistency items (--version,
--profile/--set/--html on run, sweep and thresholds alike, one wording for written files, provenance per sweep row,
the winner named, dp_gate explained, capture errors warned, lazy imports)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simulator.cli.main import main
from simulator.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"model": {"preset": "DeepSeek-V2-Lite"}, "platform": {"profile": "mi300x"},
         "parallelism": {"tp": 1, "dp": 2, "ep": 2}, "load": {"concurrency": 4},
         "thresholds": {"concurrency": [1, 8]}}
HUGE = {"streams": {"main": {"kind": "nonblocking"}},
        "ops": [{"launch": {"kernel": "k", "stream": "main", "dur_us": 1.7e308}}] * 2}
NAN = {"streams": {"main": {"kind": "nonblocking"}},
       "ops": [{"launch": {"kernel": "k", "stream": "main", "dur_us": float("nan")}}]}
MANY = {"model": {"preset": "DeepSeek-V2-Lite"}, "platform": {"profile": "mi300x"},
        "parallelism": {"tp": 0, "dp": 0, "ep": 0}, "load": {"concurrency": 0, "input_len": 0, "output_len": 0}}


def moesim(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``moesim argv`` (argparse's own errors exit through SystemExit)."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = int(stop.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """The inputs of the table, written into tmp_path (the only folder tests write to)."""
    paths = {}
    for name, doc in (("s", SMALL), ("huge", HUGE), ("nan", NAN), ("many", MANY)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        paths[name] = str(path)
    profile = json.loads((ROOT / "simulator/profiles/mi300x.json").read_text())
    profile["ceilings"]["hbm_GBps"]["value"] = profile["ceilings"]["bf16_tflops"]["value"] = 1e-300
    (tmp_path / "tiny.json").write_text(json.dumps(profile))
    paths["tiny"] = str(tmp_path / "tiny.json")
    (tmp_path / "measurements").mkdir()
    paths["tmp"] = str(tmp_path)
    return paths


BAD_INPUT = [
    # wrong or unsafe results
    ("repeated --set", ["sweep", "{s}", "--set", "load.concurrency=1,2", "--set", "load.concurrency=4"],
     "load.concurrency is given twice"),
    ("--set inside another --set", ["sweep", "{s}", "--set", "load={{concurrency: 2}}", "--set",
                                    "load.concurrency=4"], "both given"),
    ("--profile and --set platform.profile", ["run", "{s}", "--profile", "b200", "--set", "platform.profile=h200"],
     "platform.profile is given twice"),
    ("unwritable output", ["run", "{s}", "--html", "/proc/x.html"], "cannot write in /proc"),
    ("output is a folder", ["run", "{s}", "--trace-out", "{tmp}"], "is a folder"),
    ("output folder missing", ["thresholds", "{s}", "--html", "{tmp}/missing/t.html"], "does not exist"),
    ("png folder missing", ["report", "{s}", "--html", "{tmp}/r.html", "--png", "{tmp}/missing/r.png"],
     "does not exist"),
    ("report over its scenario", ["report", "{s}", "--html", "{s}"], "that is an input of this command"),
    ("trace over the scenario", ["run", "{s}", "--trace-out", "{s}"], "that is an input of this command"),
    ("sweep page over the scenario", ["sweep", "{s}", "--set", "load.concurrency=1", "--html", "{s}"],
     "that is an input"),
    ("sim trace over the program", ["sim", "{huge}", "--trace-out", "{huge}"], "that is an input"),
    ("two outputs one file", ["run", "{s}", "--trace-out", "{tmp}/a.json", "--html", "{tmp}/a.json"],
     "writes the same file"),
    ("validate page unwritable", ["validate", "--html", "/proc/v.html"], "cannot write in /proc"),
    ("calibrate output unwritable", ["calibrate", "--out", "/proc/p.json", "--from-measurements",
                                     "{tmp}/measurements"], "cannot write in /proc"),
    ("huge duration", ["sim", "{huge}"], "expected a number ≥ 0 and ≤ 1e+09 µs"),
    ("NaN duration", ["sim", "{nan}"], "dur_us: got nan; expected a finite number ≥ 0"),
    ("huge concurrency", ["run", "{s}", "--set", "load.concurrency=1000000000000000000000000000000"],
     "expected a number ≥ 1 and ≤ 1048576"),
    ("exponent concurrency", ["sweep", "{s}", "--set", "load.concurrency=1e300"], "got 1e+300; expected a number"),
    ("infinite margin", ["thresholds", "{s}", "--set", "thresholds.margin=.inf"],
     "got inf; expected a finite number ≥ 0 and < 1"),
    ("NaN link latency", ["run", "{s}", "--set", "platform.link_latency_us=.nan"], "got nan; expected a finite"),
    ("several values to run", ["run", "{s}", "--set", "load.concurrency=1,2"], "give one value here"),
    ("one invalid sweep point", ["sweep", "{s}", "--set", "parallelism.tp=1,2"], "--skip-invalid runs the others"),
    ("zip of unequal lengths", ["sweep", "{s}", "--zip", "load.concurrency=1,2,load.input_len=8"],
     "zipped fields need the same number"),
    ("five errors shown", ["run", "{many}"], "(and 1 more)"),
    ("absurd result (run)", ["run", "{s}", "--profile", "{tiny}"], "beyond 1e+12: check the profile's figures"),
    ("absurd result (sweep)", ["sweep", "{s}", "--profile", "{tiny}"], "beyond 1e+12: check the profile's figures"),
    ("absurd result (thresholds)", ["thresholds", "{s}", "--profile", "{tiny}"], "beyond 1e+12: check the profile"),
    ("report over its profile", ["report", "{s}", "--profile", "{tiny}", "--html", "{tiny}"], "is an input"),
]


@pytest.mark.parametrize(("argv", "message"), [case[1:] for case in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_nothing_written(argv: list[str], message: str, files: dict[str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.stat().st_mtime_ns for p in Path(files["tmp"]).rglob("*")}
    code, out, err = moesim([a.format(**files) for a in argv], capsys)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith(f"moesim {argv[0]}: error: "), err
    assert message in err
    assert {p: p.stat().st_mtime_ns for p in Path(files["tmp"]).rglob("*")} == before, "a file was written"


@pytest.mark.parametrize(("argv", "usage"), [
    (["run", "x.yaml", "--bogus"], "usage: moesim run "),
    (["sweep", "x.yaml", "--jobs", "0"], "usage: moesim sweep "),
    (["whatif", "trace", "t.json", "--aux-region", "a", "--measured-us", "nan"], "usage: moesim whatif trace "),
    (["whatif", "trace", "t.json", "--aux-region", "a", "--frobnicate"], "usage: moesim whatif trace "),
])
def test_argument_errors_show_the_sub_commands_usage(argv: list[str], usage: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = moesim(argv, capsys)
    assert code == 2 and out == "" and err.startswith(usage)
    assert err.strip().splitlines()[-1].startswith(f"moesim {' '.join(argv[:2] if argv[0] == 'whatif' else argv[:1])}"
                                                   ": error: ")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = moesim(["--version"], capsys)
    assert code == 0 and out == f"moesim {version('moesim')}\n"


def test_sweep_names_the_profile_per_row(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = moesim(["sweep", files["s"], "--set", "platform.profile=mi300x,b200"], capsys)
    assert code == 0
    rows = [line for line in out.splitlines() if line.lstrip().startswith(("mi300x", "b200"))]
    assert len(rows) == 2
    assert rows[0].endswith(f"— {load_profile('mi300x').describe()}")
    assert rows[1].endswith(f"— {load_profile('b200').describe()}")
    assert all("DATASHEET" in row for row in rows)


def test_sweep_skip_invalid_and_zip(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = moesim(["sweep", files["s"], "--set", "parallelism.tp=1,2", "--skip-invalid"], capsys)
    assert code == 0
    assert out.splitlines()[-2] == "skipped 1 invalid case(s):" and "parallelism.tp=2" in out.splitlines()[-1]
    code, out, _ = moesim(["sweep", files["s"], "--zip", "load.concurrency=1,8", "load.input_len=64,128",
                           "--json"], capsys)
    doc = json.loads(out)
    assert [c["params"] for c in doc["cases"]] == [{"load.concurrency": 1, "load.input_len": 64},
                                                  {"load.concurrency": 8, "load.input_len": 128}]
    assert doc["zip"] == [["load.concurrency", "load.input_len"]]


def test_profile_and_set_on_run_sweep_and_thresholds(files: dict[str, str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--profile", "b200", "--set", "load.concurrency=2"]
    code, out, _ = moesim(["run", files["s"], *common, "--json"], capsys)
    run = json.loads(out)
    assert code == 0 and run["profile"]["name"] == "b200" and run["inputs"]["tokens_per_rank"] == 2
    code, out, _ = moesim(["sweep", files["s"], *common, "--json"], capsys)
    sweep = json.loads(out)
    assert code == 0 and sweep["cases"][0]["profile"]["name"] == "b200"
    assert sweep["cases"][0]["params"] == {"platform.profile": "b200", "load.concurrency": 2}
    code, out, _ = moesim(["thresholds", files["s"], "--profile", "b200", "--set", "thresholds.concurrency=[2]",
                           "--json"], capsys)
    rec = json.loads(out)
    assert code == 0 and rec["profile"].startswith("b200") and len(rec["curve"]["points"]) == 1


def test_written_files_have_one_wording(files: dict[str, str], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    trace, page, sweep_page, th_page = (tmp_path / n for n in ("t.json", "r.html", "s.html", "th.html"))
    _, out, _ = moesim(["run", files["s"], "--trace-out", str(trace), "--html", str(page)], capsys)
    assert f"trace written to {trace} (open in ui.perfetto.dev)" in out and f"report written to {page}\n" in out
    _, out, _ = moesim(["sweep", files["s"], "--set", "load.concurrency=1,2", "--html", str(sweep_page)], capsys)
    assert out.endswith(f"sweep page written to {sweep_page}\n") and sweep_page.is_file()
    _, out, _ = moesim(["thresholds", files["s"], "--html", str(th_page)], capsys)
    assert out.endswith(f"report written to {th_page}\n") and "fig-gains" in th_page.read_text()
    _, out, _ = moesim(["sim", str(ROOT / "scenarios/programs/event_pair_fork_join.yaml"), "--trace-out",
                        str(trace)], capsys)
    assert f"trace written to {trace} (open in ui.perfetto.dev)" in out


def test_run_names_the_winner_and_by_how_much(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = moesim(["run", files["s"], "--json"], capsys)
    steps = sorted((r["step_us"], r["strategy"]) for r in json.loads(out)["results"] if r["step_us"] is not None)
    (best_us, best), (runner_us, runner) = steps[:2]
    _, out, _ = moesim(["run", files["s"]], capsys)
    line = out.splitlines()[-1]
    assert line.startswith(f"fastest: {best}, step {best_us / 1000:.3f} ms")
    assert line.endswith(f"{(runner_us - best_us) / runner_us:.2%} ({(runner_us - best_us) / 1000:.3f} ms per "
                         f"step) ahead of the runner-up {runner}")


def test_thresholds_explain_dp_gate(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = moesim(["thresholds", files["s"]], capsys)
    assert "  dp_gate=" in out and "note: dp_gate is not a vLLM setting: " in out
    _, out, _ = moesim(["thresholds", files["s"], "--json"], capsys)
    assert json.loads(out)["dp_gate_note"].startswith("dp_gate is not a vLLM setting")


def test_sim_warns_about_capture_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = moesim(["sim", str(ROOT / "scenarios/programs/capture_unjoined.yaml")], capsys)
    assert code == 0 and "0 kernels" in out
    assert err.startswith("moesim sim: warning: capture error (unjoined) in graph 'g'") and "not simulated" in err
    _, out, _ = moesim(["sim", str(ROOT / "scenarios/programs/capture_unjoined.yaml"), "--json"], capsys)
    assert [e["kind"] for e in json.loads(out)["capture_errors"]] == ["unjoined"]


def test_leaving_the_calibrated_range_warns(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = str(ROOT / "scenarios/dsv3_h200_dp8.yaml")
    code, out, err = moesim(["run", scenario, "--set", "load.concurrency=2048", "--json"], capsys)
    assert code == 0 and "moesim run: warning: 2048 tokens/rank of deepseek_v3 go beyond the sizes measured" in err
    assert err.removeprefix("moesim run: warning: ").strip() == json.loads(out)["warnings"][0]
    code, out, err = moesim(["run", scenario, "--set", "load.concurrency=2", "--json"], capsys)
    assert code == 0 and err == "" and json.loads(out)["warnings"] == []
    # a datasheet profile carrying another GPU's tables (the H100's, from the H200) warns from those tables
    code, out, err = moesim(["run", scenario, "--set", "platform.profile=h100", "--set", "load.concurrency=2048",
                             "--json"], capsys)
    assert code == 0 and "go beyond the sizes measured by profile h100 (NVIDIA H200)" in err
    code, out, err = moesim(["run", scenario, "--set", "platform.profile=mi300x", "--set", "load.concurrency=2048",
                             "--json"], capsys)
    assert code == 0 and json.loads(out)["warnings"] == []  # no tables: nothing to leave
    # a TP4 rank's grouped GEMMs have no table: the warning says the shard law costs them, apart from the dense GEMMs
    code, out, err = moesim(["run", str(ROOT / "scenarios/qwen2_57b_h200_tp4.yaml"), "--set", "load.concurrency=2",
                             "--json"], capsys)
    warnings = json.loads(out)["warnings"]
    assert code == 0 and any("costed from its fitted kernel families" in w and "grouped_mm" not in w
                             for w in warnings)
    assert any("costed by its grouped GEMM shard law" in w and "grouped_mm K=3584 N=1280" in w for w in warnings)


def test_help_imports_no_simulation_code() -> None:
    code = ("import sys; from simulator.cli.main import build_parser; build_parser(); "
            "heavy = sorted(m for m in ('pydantic', 'simulator.evaluate', 'simulator.engine', 'simpy', 'yaml', "
            "'simulator.kineto.replay', 'tqdm') if m in sys.modules); assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_write_that_fails_late_is_one_line_and_leaves_nothing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    from simulator import outputs
    from simulator.errors import InputError

    def refuse(*_: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(outputs.os, "replace", refuse)
    with pytest.raises(InputError, match=r"r\.html: cannot write \(Read-only file system\)"):
        outputs.write_text_atomic(tmp_path / "r.html", "<html>")
    assert list(tmp_path.iterdir()) == []


def test_non_finite_results_are_refused_naming_where() -> None:
    from simulator.errors import InputError
    from simulator.outputs import check_finite, dumps

    with pytest.raises(InputError, match=r"result\.cases\[1\]\.step_us is nan: the inputs are too large"):
        dumps({"cases": [{"step_us": 1.0}, {"step_us": float("nan")}]})
    with pytest.raises(InputError, match=r"result\.x is inf"):
        check_finite({"x": float("inf")})
    check_finite({"x": 1e300})
