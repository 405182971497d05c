"""The report in a real browser: headless Chromium renders every figure (plotly's SVG layers with drawn
marks) without JavaScript errors, and ``moesim report --png`` captures the whole page (into a temporary
folder: the README's picture is made by that command, not by the tests). Without Chromium these tests are
skipped with a message saying so (CI installs Debian's ``chromium``)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from simulator.cli.main import main
from simulator.report.browser import dump_dom, find_chromium, page_height, scan_figures
from tests.test_report import FULL_FIGURES, make_datasheet_report, make_full_report

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="Chromium not installed (/usr/bin/chromium missing): the real-browser test of the report did NOT run; "
           "install it with `apt-get install -y chromium`")


def rendered(html_path: Path) -> tuple[dict[str, dict[str, int]], list[str], str]:
    """(per figure: SVG layers and marks, JavaScript errors, the rendered-plots marker) of a loaded page."""
    dom, _ = dump_dom(html_path)
    errors = re.search(r'<html[^>]*\sdata-js-errors="([^"]*)"', dom)
    assert errors is not None, "the error collector did not run"
    marker = re.search(r'data-plots-rendered="([^"]*)"', dom)
    # the figures the page lists, whether or not their plot call ran
    ids = json.loads(re.search(r'id="moesim-figures">(.*?)</script>', html_path.read_text()).group(1))
    return scan_figures(dom, ids), json.loads(errors.group(1).replace("&quot;", '"')), marker.group(1) if marker else ""


def test_full_report_renders_every_figure(tmp_path: Path) -> None:
    path, _ = make_full_report(tmp_path)
    figures, errors, marker = rendered(path)
    assert errors == []
    assert set(figures) == set(FULL_FIGURES)
    for fig_id, found in figures.items():
        assert found["main_svg"] >= 1, f"{fig_id}: no plotly SVG layer"
        assert found["marks"] >= 1, f"{fig_id}: nothing drawn"
    assert marker == str(len(FULL_FIGURES))


def test_broken_page_is_caught(tmp_path: Path) -> None:
    """The checks can fail: a script error is collected and a figure whose plot call never ran has no SVG."""
    html = make_datasheet_report(tmp_path)[0].read_text()
    broken = re.sub(r'Plotly\.newPlot\(\s*"fig-gains"', 'undefinedFunction("fig-gains"', html, count=1)
    assert broken != html
    page = tmp_path / "broken.html"
    page.write_text(broken)
    figures, errors, _ = rendered(page)
    assert any("undefinedFunction" in e for e in errors)
    assert figures["fig-gains"]["main_svg"] == 0 and figures["fig-timeline-1"]["main_svg"] >= 1


def test_screenshot_is_the_whole_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's picture as its command makes it (moesim report ... --png), into a temporary folder: the
    whole page, not a fixed crop, with plots on it."""
    monkeypatch.chdir(ROOT)
    page, png_path = tmp_path / "report.html", tmp_path / "report.png"
    assert main(["report", "scenarios/dsv3_h200_dp8.yaml", "--html", str(page), "--png", str(png_path)]) == 0
    figures, errors, _ = rendered(page)
    assert errors == [] and all(f["main_svg"] and f["marks"] for f in figures.values()), figures
    png = png_path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1400, page_height(page, 1400))
    assert height > 2400, "the page is taller than the old fixed 1400 x 2400 crop"
    assert len(png) > 100_000, "a blank page compresses to ~11 kB; this one should hold plots"
