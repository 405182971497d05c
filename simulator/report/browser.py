"""Headless Chromium for the report: load a page, dump the rendered DOM (with the JavaScript errors it
raised) and take screenshots. Every run gets a fresh profile folder and no network-facing services."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--mute-audio", "--disable-dev-shm-usage")
VIRTUAL_TIME_MS = 20000  # lets plotly finish drawing before the DOM is dumped or the screenshot taken
ERRORS_ATTR = "data-js-errors"
RENDERED_ATTR = "data-plots-rendered"

# Installed first thing in <head>: records every uncaught error, unhandled rejection and console.error in an
# attribute of <html>, which --dump-dom then shows.
_COLLECT = """<script>(function () {
  var errors = [];
  function note(m) { errors.push(String(m));
    document.documentElement.setAttribute('data-js-errors', JSON.stringify(errors)); }
  window.addEventListener('error', function (e) { note((e.message || 'error') + ' at ' + (e.filename || '?') +
    ':' + (e.lineno || '?')); });
  window.addEventListener('unhandledrejection', function (e) { note('unhandled rejection: ' + e.reason); });
  var original = console.error;
  console.error = function () { note('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments); };
  document.documentElement.setAttribute('data-js-errors', '[]');
})();</script>"""
_DONE = """<script>window.addEventListener('load', function () {
  document.documentElement.setAttribute('data-plots-rendered',
    String(document.querySelectorAll('.js-plotly-plot .main-svg').length > 0 ?
           document.querySelectorAll('.js-plotly-plot').length : 0));
  function height() { document.documentElement.setAttribute('data-page-height',
    String(document.documentElement.scrollHeight)); }
  height(); setInterval(height, 250);
});</script>"""
HEIGHT_ATTR = "data-page-height"
MAX_HEIGHT = 16384  # Chromium's largest window; a taller page is cut there


class BrowserMissing(RuntimeError):
    """No Chromium on this machine."""


def find_chromium() -> str | None:
    """``$MOESIM_CHROMIUM``, ``/usr/bin/chromium`` or a chromium/chrome on the PATH."""
    env = os.environ.get("MOESIM_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def instrument(page: str) -> str:
    """The page with the error collector first in <head> and the rendered-plots marker after load."""
    head = page.index("<head>") + len("<head>")
    end = page.rindex("</body>")
    return page[:head] + _COLLECT + page[head:end] + _DONE + page[end:]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    chromium = find_chromium()
    if chromium is None:
        raise BrowserMissing("no Chromium found (install Debian's chromium, or set MOESIM_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="moesim-chromium-") as profile:
        cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={VIRTUAL_TIME_MS}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def dump_dom(page: str | Path, timeout: float = 120, width: int | None = None) -> tuple[str, str]:
    """Load an instrumented copy of ``page`` (in a window ``width`` pixels wide, if given) and return (rendered
    DOM, Chromium's stderr)."""
    with tempfile.TemporaryDirectory(prefix="moesim-page-") as folder:
        copy = Path(folder) / "page.html"
        copy.write_text(instrument(Path(page).read_text()))
        size = [f"--window-size={width},1000"] if width else []
        done = _run([*size, "--enable-logging=stderr", "--v=0", "--dump-dom", copy.as_uri()], timeout)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout, done.stderr


def page_height(page: str | Path, width: int, timeout: float = 120) -> int:
    """The rendered height of ``page`` in a window ``width`` pixels wide (its plots drawn)."""
    dom, _ = dump_dom(page, timeout, width)
    found = re.search(rf'<html[^>]*\s{HEIGHT_ATTR}="(\d+)"', dom)
    if found is None:
        raise RuntimeError("the page did not report its height")
    return int(found.group(1))


def screenshot(page: str | Path, png: str | Path, width: int = 1400, height: int | None = None,
               timeout: float = 120) -> None:
    """Save a PNG of ``page`` (written atomically): the whole page ``width`` pixels wide, or its top ``height``
    pixels."""
    png = Path(png)
    if not png.parent.is_dir():
        raise FileNotFoundError(f"{png.parent} does not exist")
    if height is None:
        height = min(page_height(page, width, timeout), MAX_HEIGHT)
    fd, tmp = tempfile.mkstemp(dir=png.parent, prefix=f".{png.name}.", suffix=".png")
    os.close(fd)
    try:
        done = _run([f"--window-size={width},{height}", f"--screenshot={tmp}", Path(page).resolve().as_uri()],
                    timeout)
        if done.returncode != 0 or Path(tmp).stat().st_size == 0:
            raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, png)
    finally:
        Path(tmp).unlink(missing_ok=True)


class _FigureScan(HTMLParser):
    """Per figure div (``id`` listed in ``ids``): plotly's SVG layers and the drawn marks inside it."""

    def __init__(self, ids: set[str]) -> None:
        super().__init__()
        self.ids = ids
        self.stack: list[str | None] = []
        self.found: dict[str, dict[str, int]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        owner = a.get("id") if a.get("id") in self.ids else (self.stack[-1] if self.stack else None)
        if tag not in _VOID:
            self.stack.append(owner)
        if owner is None:
            return
        counts = self.found.setdefault(owner, {"main_svg": 0, "marks": 0})
        classes = set((a.get("class") or "").split())
        counts["main_svg"] += tag == "svg" and "main-svg" in classes
        # drawn marks: bar and marker points, scatter lines, heatmap images, table cells
        counts["marks"] += bool(classes & {"point", "js-line", "hm", "cell-text-holder"})

    def handle_endtag(self, tag: str) -> None:
        if tag not in _VOID and self.stack:
            self.stack.pop()


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def scan_figures(dom: str, ids: list[str]) -> dict[str, dict[str, int]]:
    """For each figure id: how many plotly SVG layers (``main_svg``) and drawn marks (``marks``) it holds."""
    scan = _FigureScan(set(ids))
    scan.feed(dom)
    return {i: scan.found.get(i, {"main_svg": 0, "marks": 0}) for i in ids}
