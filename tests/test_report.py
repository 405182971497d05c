"""The design-review report: every figure present with data, figures checked against independent
computations, the header's provenance, the calibration section's two states, CLI errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.cli.main import main
from simulator.evaluate import evaluate
from simulator.ir import load_program
from simulator.profile import load_profile, parse_profile
from simulator.report.build import write_report
from simulator.report.collect import check_row
from simulator.report.figures import hazards_figure
from simulator.scenario import parse_scenario
from simulator.validation import predict_case

ROOT = Path(__file__).resolve().parent.parent
H200 = str(ROOT / "scenarios/dsv3_h200_dp8.yaml")
MI300X_TP8 = str(ROOT / "scenarios/dsv3_mi300x_tp8.yaml")
TRACE = str(ROOT / "tests/data/kineto/moe_eager_two_streams.json")
FULL_FIGURES = ("fig-timeline-1", "fig-timeline-2", "fig-trace", "fig-gains", "fig-calibration",
                "fig-threshold-map", "fig-hazards")


def plotted(html: str) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Every ``Plotly.newPlot(id, data, layout, ...)`` call of the page: id -> (data, layout)."""
    decoder = json.JSONDecoder()
    out = {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', html):
        data, end = decoder.raw_decode(html, m.end())
        layout, _ = decoder.raw_decode(html, html.index("{", end))
        out[m.group(1)] = (data, layout)
    return out


def has_data(trace: dict[str, Any]) -> bool:
    """A trace that draws something: bars/points (x or y), heatmap cells (z) or table cells."""
    if trace["type"] == "table":
        return any(len(col) for col in trace["cells"]["values"])
    if trace["type"] == "heatmap":
        return any(v is not None for row in trace["z"] for v in row)
    return any(v is not None for v in (trace.get("x") or [])) and any(v is not None for v in (trace.get("y") or []))


CASES = [{"preset": p, "tokens": t, "strategy": s, "mode": m, "layers_per_replay": 2}
         for p in ("qwen3_30b_a3b", "deepseek_v2_lite") for t in (1, 16) for m in ("eager", "graph")
         for s in ("sequential", "multi_stream") if not (p == "qwen3_30b_a3b" and s == "multi_stream")]
MEASURED_SCALE = {"graph": 1.02, "eager": 0.97}  # "measured" = simulated × this: known errors 1/scale − 1


def calibrated_profile(folder: Path) -> Path:
    """h200-datasheet relabelled calibrated, recording a cases.json whose measurements are its own
    predictions scaled per mode (so the report finds and validates it, with known errors)."""
    doc = json.loads(load_profile("h200-datasheet").model_dump_json())
    meas = folder / "h200" / "2026-12-02"
    meas.mkdir(parents=True)
    doc.update(name="h200-synthetic", provenance="calibrated", measurements=[str(meas / "cases.json")],
               fit={"layer": {"holdout_presets": ["deepseek_v2_lite"], "holdout_tokens": []}})
    profile = parse_profile(doc)
    cases = [{**c, "median_us": predict_case(profile, c) * MEASURED_SCALE[c["mode"]]} for c in CASES]
    (meas / "cases.json").write_text(json.dumps(cases))
    path = folder / "h200-synthetic.json"
    path.write_text(json.dumps(doc))
    return path


def make_full_report(folder: Path) -> tuple[Path, Any]:
    """Two scenarios on a calibrated profile and a real trace: every section filled."""
    out = folder / "report.html"
    summary = write_report([H200, MI300X_TP8], out, "moesim report (test)", profile=str(calibrated_profile(folder)),
                           trace=TRACE, progress=False)
    return out, summary


def datasheet_scenario(folder: Path) -> str:
    """The shipped H200 scenario on the H200 datasheet profile (no measurements behind it)."""
    import yaml

    doc = yaml.safe_load(Path(H200).read_text())
    doc["platform"]["profile"] = "h200-datasheet"
    path = folder / "dsv3_h200_dp8_datasheet.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def make_datasheet_report(folder: Path) -> tuple[Path, Any]:
    """The H200 scenario on datasheet figures: no validation data exists for that profile."""
    out = folder / "datasheet.html"
    return out, write_report([datasheet_scenario(folder)], out,
                             "moesim report scenarios/dsv3_h200_dp8.yaml --html x.html", progress=False)


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    return make_full_report(tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="module")
def datasheet_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    return make_datasheet_report(tmp_path_factory.mktemp("datasheet"))


def test_every_figure_present_with_data(full_report: tuple[Path, Any]) -> None:
    path, summary = full_report
    html = path.read_text()
    figs = plotted(html)
    assert set(figs) == set(FULL_FIGURES) == set(summary.figures)
    for fig_id, (data, _) in figs.items():
        assert data and any(has_data(t) for t in data), fig_id
    assert all(state == "ok" for state in summary.sections.values()), summary.sections
    # self-contained: plotly.js inlined exactly once, nothing fetched from the network
    assert html.count("plotly.js v") == 1
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?:", html)


def test_header_names_provenance_version_and_command(datasheet_report: tuple[Path, Any]) -> None:
    html = datasheet_report[0].read_text()
    header = html[html.index("<header>"):html.index("</header>")]
    assert "h200-datasheet: DATASHEET figures for NVIDIA H200, not calibrated" in header
    assert "moesim</dt><dd>0.1.0" in header or "moesim</dt><dd>unknown" in header
    assert "moesim report scenarios/dsv3_h200_dp8.yaml --html x.html" in header


def test_calibrated_header_and_calibration_points(full_report: tuple[Path, Any]) -> None:
    path, summary = full_report
    assert any("calibrated on NVIDIA H200, 2026-12-02" in line for line in summary.profiles)
    data, _ = plotted(path.read_text())["fig-calibration"]
    points = [t for t in data if t["type"] == "scatter" and t["mode"] == "markers"]
    # one point per GPU case measured (CASES has no cpu cases)
    assert sum(len(t["x"]) for t in points) == len(CASES)
    for t in points:  # each point's error is the known one of its mode
        mode = t["name"].split(" · ")[1]
        assert all(e == pytest.approx(100 * (1 / MEASURED_SCALE[mode] - 1), abs=1e-2) for _, _, e in t["customdata"])
    held = {t["name"].split(" · ")[2] for t in points}
    assert held == {"held out", "fitted on"}
    band = [t for t in data if t.get("name") == "±3% band"]
    assert band and band[0]["y"][0] == pytest.approx(band[0]["x"][0] * 1.03)


def test_calibration_missing_only_without_measurements(datasheet_report: tuple[Path, Any]) -> None:
    path, summary = datasheet_report
    html = path.read_text()
    assert "fig-calibration" not in plotted(html)
    assert 'data-missing="calibration"' in html and "No validation data" in summary.sections["calibration"]
    assert all(state == "ok" for key, state in summary.sections.items() if key != "calibration")


def test_stored_validation_report_is_used(tmp_path: Path) -> None:
    rows = [{"preset": "p", "tokens": 1, "strategy": "sequential", "mode": "graph", "measured_us": 100.0,
             "predicted_us": 104.0, "error": 0.04, "split": "validation"},
            {"preset": "p", "tokens": 1, "strategy": "multi_stream", "mode": "graph", "measured_us": 90.0,
             "predicted_us": 89.1, "error": -0.01, "split": "validation"}]
    stored = tmp_path / "validate.json"
    stored.write_text(json.dumps({"profile": "h200 (calibrated on NVIDIA H200, 2026-12-02)", "cases": rows}))
    out = tmp_path / "r.html"
    write_report([H200], out, "cmd", validation=str(stored), progress=False)
    data, _ = plotted(out.read_text())["fig-calibration"]
    bars = {t["name"].split(":")[0]: t for t in data if t["type"] == "bar"}
    assert bars["sequential"]["y"] == [pytest.approx(4.0)] and bars["multi_stream"]["y"] == [pytest.approx(-1.0)]


def test_timeline_lanes_and_events(datasheet_report: tuple[Path, Any]) -> None:
    figs = plotted(datasheet_report[0].read_text())
    data, layout = figs["fig-timeline-1"]
    lanes = {k: v["ticktext"] for k, v in layout.items() if k.startswith("yaxis")}
    # rows in strategy order: sequential (one stream), multi_stream (main + aux), fused_shared (one stream)
    assert lanes["yaxis"] == ["host", "main"] and lanes["yaxis2"] == ["host", "main", "aux"]
    aux = [t for t in data if t["type"] == "bar" and t["name"] == "aux"]
    assert len(aux) == 1 and aux[0]["yaxis"] == "y2"
    assert any("shared" in name for name in aux[0]["text"])
    assert not any("shared" in n for t in data if t["type"] == "bar" and t["name"] == "main" for n in t["text"]
                   if t.get("yaxis") == "y2")
    # collectives (dispatch, combine) drawn in the communication colour
    comm = [n for t in data if t["type"] == "bar" and t["name"] == "communication" for n in t["text"]]
    assert {"dispatch", "combine"} <= set(comm)
    # multi_stream forks onto aux and joins back: two record -> wait arrows, from main to aux and back
    arrows = [a for a in layout["annotations"] if a.get("showarrow")]
    assert len(arrows) == 2 and {(a["ay"], a["y"]) for a in arrows} == {(1, 2), (2, 1)}
    # every bar ends no later than the strategy's layer time printed in its title
    for row, title in enumerate(a["text"] for a in layout["annotations"] if not a.get("showarrow")):
        layer_us = float(re.search(r"layer ([0-9.]+) µs", title).group(1))
        axis = "y" if row == 0 else f"y{row + 1}"
        ends = [b + d for t in data if t["type"] == "bar" and t.get("yaxis", "y") == axis
                for b, d in zip(t["base"], t["x"], strict=True)]
        assert max(ends) <= layer_us + 20.0  # the layer time excludes the host's replay call


def test_gain_curve_matches_direct_evaluation(datasheet_report: tuple[Path, Any]) -> None:
    data, _ = plotted(datasheet_report[0].read_text())["fig-gains"]
    line = next(t for t in data if t["name"] == "multi_stream · NVIDIA H200 TP1 DP8 EP8" and t["xaxis"] == "x")
    doc = yaml.safe_load(Path(H200).read_text())
    doc["platform"]["profile"] = "h200-datasheet"  # as in the datasheet report
    for tokens, gain in zip(line["x"], line["y"], strict=True):
        doc["load"]["concurrency"] = tokens  # per DP rank: tokens per rank == concurrency
        ev = evaluate(parse_scenario(doc, "t"), "t")
        seq, ms = ev.result("sequential").step_us, ev.result("multi_stream").step_us
        assert gain == pytest.approx(100 * (seq - ms) / seq, rel=1e-9)
    stars = [t for t in data if t["name"].startswith("threshold ") and t["xaxis"] == "x"]
    assert stars, "the recommended thresholds are marked"


def test_threshold_map_cell_is_the_fastest_strategy(datasheet_report: tuple[Path, Any]) -> None:
    data, _ = plotted(datasheet_report[0].read_text())["fig-threshold-map"]
    heat = next(t for t in data if t["type"] == "heatmap")
    row = heat["y"].index("NVIDIA H200 TP1 DP8 EP8")
    col = heat["x"].index("256")  # 32 requests per DP rank × 8 ranks: the scenario as shipped
    doc = yaml.safe_load(Path(H200).read_text())
    doc["platform"]["profile"] = "h200-datasheet"  # as in the datasheet report
    ev = evaluate(parse_scenario(doc, "t"), "t")
    steps = sorted((r.step_us, r.strategy) for r in ev.results)
    winner, runner_up = steps[0], steps[1]
    text = heat["text"][row][col]
    assert text.startswith(winner[1])
    assert f"+{100 * (runner_up[0] - winner[0]) / runner_up[0]:.1f}%" in text


def test_hazard_table_reports_races(tmp_path: Path) -> None:
    race = check_row("seed003", "lazy switch", load_program(ROOT / "scenarios/programs/seed003_lazy_switch_race.yaml"))
    fixed = check_row("seed003", "fixed", load_program(ROOT / "scenarios/programs/seed003_lazy_switch_fixed.yaml"))
    unjoined = check_row("capture", "unjoined", load_program(ROOT / "scenarios/programs/capture_unjoined.yaml"))
    assert not race.clean and "RAW race on 'input_ids'" in race.hazards[0]
    assert fixed.clean and not unjoined.clean and unjoined.capture_errors
    table = hazards_figure([race, fixed, unjoined]).data[0]
    verdicts = table.cells.values[3]
    assert verdicts[1] == "clean" and "1 race(s)" in verdicts[0] and "1 capture error(s)" in verdicts[2]


def test_scenario_schedules_are_checked(datasheet_report: tuple[Path, Any]) -> None:
    data, _ = plotted(datasheet_report[0].read_text())["fig-hazards"]
    cells = data[0]["cells"]["values"]
    assert cells[1] == ["sequential", "multi_stream", "fused_shared"]
    assert cells[3] == ["clean"] * 3


@pytest.mark.parametrize(("extra", "message"), [
    (["missing.yaml"], "missing.yaml"),
    ([H200, "--validation", "nope.json"], "nope.json: no such file"),
    ([H200, "--profile", "no-such-profile"], "unknown profile"),
    ([H200, "--png", "shot.jpg"], "expected a .png"),
])
def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    out = tmp_path / "r.html"
    assert main(["report", *extra, "--html", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not out.exists()


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", datasheet_scenario(tmp_path), "--html", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["html"] == str(out) and out.is_file()
    assert doc["figures"] == ["fig-timeline-1", "fig-gains", "fig-threshold-map", "fig-hazards"]
    assert "No validation data" in doc["sections"]["calibration"]


def test_cli_module_does_not_import_plotly() -> None:
    code = "import sys, simulator.cli.report; assert 'plotly' not in sys.modules, 'plotly imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_png_skipped_with_a_message_without_chromium(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOESIM_CHROMIUM", str(tmp_path / "no-chromium"))
    out, png = tmp_path / "r.html", tmp_path / "r.png"
    assert main(["report", H200, "--html", str(out), "--png", str(png)]) == 0
    assert "PNG skipped: no Chromium found" in capsys.readouterr().err
    assert out.is_file() and not png.exists()


def test_sweep_page(tmp_path: Path) -> None:
    from simulator.report.build import write_sweep_html
    from simulator.scenario import load_document
    from simulator.sweep import parse_set, sweep

    axes = [parse_set("load.concurrency=1,4,16"), parse_set("load.input_len=512,2048")]
    document = sweep(load_document(H200), axes, H200, progress=False)
    out = tmp_path / "sweep.html"
    write_sweep_html(document, out, "moesim sweep ... --html sweep.html")
    data, layout = plotted(out.read_text())["fig-sweep"]
    gains = {t["name"]: t for t in data if t["xaxis"] == "x"}
    assert set(gains) == {f"{s} · load.input_len={n}" for s in ("sequential", "multi_stream", "fused_shared")
                          for n in (512, 2048)}
    line = gains["multi_stream · load.input_len=2048"]
    cases = [c for c in document["cases"] if c["params"]["load.input_len"] == 2048]
    assert line["x"] == [1, 4, 16]
    assert line["y"] == [pytest.approx(100 * c["results"][1]["gain_vs_sequential"]) for c in cases]
    assert layout["xaxis"]["title"]["text"] == "load.concurrency"


def test_validation_page(tmp_path: Path) -> None:
    from simulator.report.build import write_validation_html

    rows = [{"preset": "p", "tokens": 4, "strategy": "sequential", "mode": "eager", "measured_us": 50.0,
             "predicted_us": 49.0, "error": -0.02, "split": "validation"}]
    out = tmp_path / "v.html"
    write_validation_html({"profile": "h200 (calibrated on NVIDIA H200, 2026-12-02)", "cases": rows}, out,
                          "moesim validate --html v.html")
    html = out.read_text()
    assert list(plotted(html)) == ["fig-calibration"] and "moesim validate --html v.html" in html
    assert html.count("plotly.js v") == 1
