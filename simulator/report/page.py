"""Assemble the self-contained report page: a header (profiles' provenance, moesim version, the command),
then one section per subject, every figure a plotly div, plotly.js inlined once (opens offline)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.outputs import write_text_atomic

if TYPE_CHECKING:
    import plotly.graph_objects as go

PLOT_CONFIG = {"displaylogo": False, "responsive": True,
               "toImageButtonOptions": {"format": "png", "scale": 2}}
CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 0 auto; max-width: 1360px; padding: 0 20px 40px;
       color: #222; }
header { border-bottom: 2px solid #DDE3EA; padding: 12px 0 8px; }
h1 { font-size: 24px; margin: 8px 0; } h2 { font-size: 20px; margin: 28px 0 6px; border-top: 1px solid #EEE;
       padding-top: 14px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 6px 0; font-size: 14px; }
dt { font-weight: bold; } dd { margin: 0; } code { background: #F3F5F7; padding: 1px 4px; border-radius: 3px; }
nav a { margin-right: 14px; font-size: 14px; } .note { color: #555; font-size: 14px; margin: 4px 0; }
.missing { background: #FFF6E0; border-left: 4px solid #E3A008; padding: 8px 12px; font-size: 14px; }
ul.settings { font-size: 14px; margin: 4px 0 8px; }
"""


@dataclass
class Section:
    """A titled part of the page: intro lines, figures (div id, figure) and notes."""

    key: str
    title: str
    intro: list[str] = field(default_factory=list)
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing: str | None = None  # shown instead of figures when the data does not exist
    items: list[str] = field(default_factory=list)


def moesim_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moesim")
    except PackageNotFoundError:
        return "unknown (moesim is not installed)"


def render(title: str, header: dict[str, str | list[str]], sections: Sequence[Section]) -> str:
    """The whole page as one string."""
    from plotly.offline import get_plotlyjs

    figure_ids = [div for s in sections for div, _ in s.figures]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
             f"<style>{CSS}</style>", f"<script>{get_plotlyjs()}</script>",
             f'<script type="application/json" id="moesim-figures">{json.dumps(figure_ids)}</script>',
             "</head><body>", "<header>", f"<h1>{_e(title)}</h1>", "<dl>"]
    for key, value in header.items():
        values = value if isinstance(value, list) else [value]
        rendered = "<br>".join(f"<code>{_e(v)}</code>" if key == "command" else _e(v) for v in values)
        parts.append(f"<dt>{_e(key)}</dt><dd>{rendered}</dd>")
    parts += ["</dl>", "<nav>" + "".join(f'<a href="#{s.key}">{_e(s.title)}</a>' for s in sections) + "</nav>",
              "</header>"]
    for s in sections:
        parts.append(f'<section id="{s.key}"><h2>{_e(s.title)}</h2>')
        parts += [f'<p class="note">{_e(line)}</p>' for line in s.intro]
        if s.items:
            parts.append('<ul class="settings">' + "".join(f"<li>{_e(i)}</li>" for i in s.items) + "</ul>")
        if s.missing is not None:
            parts.append(f'<p class="missing" data-missing="{s.key}">{_e(s.missing)}</p>')
        for div, fig in s.figures:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div, config=PLOT_CONFIG))
        parts += [f'<p class="note">{_e(line)}</p>' for line in s.notes]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def header_fields(profiles: list[str], command: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Profile provenance lines, the moesim version, the command and the time it ran."""
    out: dict[str, Any] = {"profiles": profiles, "moesim": moesim_version(), "command": command,
                           "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    out.update(extra or {})
    return out


def write_page(path: str | Path, title: str, header: dict[str, Any], sections: Sequence[Section]) -> None:
    write_text_atomic(path, render(title, header, sections))


def _e(text: object) -> str:
    return html.escape(str(text))
