"""One function per figure of the report; each returns a plotly ``Figure`` (plotly imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.report.collect import HazardRow, ScenarioData, Timeline
from simulator.report.colors import (
    LAYOUT_DASHES,
    LAYOUT_SYMBOLS,
    STRATEGY_COLORS,
    STREAM_COLORS,
    strategy_color,
    stream_color,
    stream_role,
)
from simulator.result import FlowArrow, HostSpan, KernelRun

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from simulator.report.trace import TraceTimeline
    from simulator.thresholds import Curve

FONT = {"family": "Helvetica, Arial, sans-serif", "size": 13}
BAND = 0.03  # the ±3% accuracy band of the calibration plots


def _layout(fig: go.Figure, title: str, height: int, legend: str = "top") -> None:
    """Title, size and theme; a short legend goes above the plot, a long one to its right."""
    if legend == "right":
        place = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1.0, "yanchor": "top",
                 "font": {"size": 11}}
        margin = {"l": 80, "r": 20, "t": 90, "b": 60}
    else:
        place = {"orientation": "h", "x": 0.0, "xanchor": "left", "y": 1 - 40 / height, "yanchor": "top",
                 "yref": "container", "font": {"size": 12}}
        margin = {"l": 80, "r": 30, "t": 110, "b": 60}
    fig.update_layout(title={"text": title, "x": 0.01, "y": 0.995, "yanchor": "top", "yref": "container",
                             "pad": {"t": 8}},
                      height=height, font=FONT, template="plotly_white", margin=margin,
                      legend={**place, "traceorder": "normal"})


# --- timelines ---------------------------------------------------------------------------------------------

def _kernel_role(timeline: Timeline, k: KernelRun) -> str:
    """A collective is drawn in the communication colour whichever stream it ran on."""
    ops = timeline.program.ops
    op = ops[k.index] if 0 <= k.index < len(ops) else None
    return "communication" if getattr(op, "family", None) == "collective" else stream_role(k.stream)


def _draw_lanes(fig: go.Figure, row: int, lanes: list[str], host: Sequence[HostSpan],
                kernels: Sequence[tuple[KernelRun, str]], flows: Sequence[FlowArrow], seen: set[str],
                legend_names: dict[str, str] | None = None) -> None:
    """Host spans and kernels as horizontal bars (lane 0 = host), record→wait events as arrows."""
    import plotly.graph_objects as go

    names = legend_names or {}
    y_of = {lane: i for i, lane in enumerate(lanes)}
    groups: dict[str, list[tuple[str, str, float, float]]] = {}
    for span in host:
        groups.setdefault("host", []).append(("host", span.label, span.start_us, span.end_us))
    for k, role in kernels:
        groups.setdefault(role, []).append((k.stream, k.name, k.start_us, k.end_us))
    for role, items in groups.items():
        color = STREAM_COLORS.get(role) or stream_color(role)
        fig.add_trace(go.Bar(
            orientation="h", base=[s for _, _, s, _ in items], x=[e - s for _, _, s, e in items],
            y=[y_of[lane] for lane, _, _, _ in items], width=0.62, name=names.get(role, role), legendgroup=role,
            showlegend=role not in seen, marker={"color": color, "line": {"color": "white", "width": 0.5}},
            text=[n for _, n, _, _ in items], textposition="inside", insidetextanchor="middle", textangle=0,
            textfont={"size": 10}, customdata=[[n, s, e, e - s] for _, n, s, e in items],
            hovertemplate="%{customdata[0]}<br>%{customdata[1]:.2f} → %{customdata[2]:.2f} µs "
                          "(%{customdata[3]:.2f} µs)<extra>" + names.get(role, role) + "</extra>"),
            row=row, col=1)
        seen.add(role)
    xref = "x" if row == 1 else f"x{row}"
    yref = "y" if row == 1 else f"y{row}"
    for f in flows:
        if f.src not in y_of or f.dst not in y_of:
            continue
        fig.add_annotation(x=f.dst_us, y=y_of[f.dst], ax=f.src_us, ay=y_of[f.src], xref=xref, yref=yref,
                           axref=xref, ayref=yref, showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.6,
                           arrowcolor="#333", text="", standoff=2)
    if flows:
        fig.add_trace(go.Scatter(
            x=[f.dst_us for f in flows], y=[y_of.get(f.dst, 0) for f in flows], mode="markers",
            marker={"symbol": "line-ns", "size": 14, "line": {"width": 2, "color": "#333"}},
            name="event: record → wait", legendgroup="event", showlegend="event" not in seen,
            customdata=[[f.event, f.src, f.src_us, f.dst, f.dst_us] for f in flows],
            hovertemplate="event %{customdata[0]}: recorded on %{customdata[1]} (work done at "
                          "%{customdata[2]:.2f} µs), wait passed on %{customdata[3]} at %{customdata[4]:.2f} µs"
                          "<extra></extra>"), row=row, col=1)
        seen.add("event")
    fig.update_yaxes(tickvals=list(range(len(lanes))), ticktext=lanes, autorange="reversed",
                     range=[len(lanes) - 0.5, -0.5], showgrid=False, row=row, col=1)


def _lane_order(stream: str) -> tuple[int, str]:
    """Lanes top to bottom: main, aux, communication, then any other stream by name."""
    order = ("main", "aux", "communication")
    role = stream_role(stream)
    return (order.index(role) if role in order else len(order), stream)


def timeline_figure(data: ScenarioData) -> go.Figure:
    """Per strategy, one simulated decoder layer (attention + MoE block replayed as a graph), a lane per
    stream, on one shared time axis."""
    from plotly.subplots import make_subplots

    rows = data.timelines
    titles = [f"{t.label}" + (f" (runs {t.ran})" if t.ran != t.strategy else "") + f": layer {t.layer_us:.1f} µs"
              for t in rows]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.35 / max(len(rows), 1),
                        subplot_titles=titles)
    seen: set[str] = set()
    for i, t in enumerate(rows, start=1):
        lanes = ["host", *sorted(t.result.streams, key=_lane_order)]
        fig.layout.annotations[i - 1].font = {"color": strategy_color(t.strategy), "size": 14}
        _draw_lanes(fig, i, lanes, t.result.host_spans, [(k, _kernel_role(t, k)) for k in t.result.kernels],
                    t.result.flows, seen)
    fig.update_xaxes(title_text="time since graph replay call (µs)", row=len(rows), col=1)
    fig.update_layout(barmode="overlay", uniformtext={"minsize": 8, "mode": "hide"}, bargap=0.1)
    _layout(fig, f"Timelines — {data.label}: one decoder layer per strategy ({data.profile.describe()})",
            150 + 190 * len(rows))
    return fig


def trace_figure(trace: TraceTimeline) -> go.Figure:
    """The real trace and its simulated replay, lane per stream, on the same time axis."""
    from plotly.subplots import make_subplots

    counts: dict[str, int] = {}
    for k in trace.real_kernels:
        counts[k.stream] = counts.get(k.stream, 0) + 1
    order = sorted(counts, key=lambda s: (-counts[s], s))
    roles = {s: ("main" if i == 0 else "aux" if i == 1 else s) for i, s in enumerate(order)}
    names = {"host": "host API calls"} | {r: f"{s} ({r})" if r != s else s for s, r in roles.items()}
    sim_streams = [s for s in trace.simulated.streams if s not in roles]
    lanes = ["host", *order, *sim_streams]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.16, subplot_titles=(
        f"real trace (measured GPU span {trace.measured_us:.1f} µs)",
        f"simulated replay as traced ({trace.simulated_us:.1f} µs; {trace.profile.describe()})"))
    seen: set[str] = set()
    _draw_lanes(fig, 1, lanes, trace.real_host, [(k, roles[k.stream]) for k in trace.real_kernels], [], seen,
                names)
    _draw_lanes(fig, 2, lanes, trace.simulated.host_spans,
                [(k, roles.get(k.stream, k.stream)) for k in trace.simulated.kernels], trace.simulated.flows, seen,
                names)
    fig.update_xaxes(title_text="time since the first replayed host call (µs)", row=2, col=1)
    fig.update_layout(barmode="overlay", uniformtext={"minsize": 8, "mode": "hide"})
    _layout(fig, f"Real vs simulated — {trace.source}", 200 + 90 * 2 * len(lanes))
    return fig


# --- gain curves and threshold map -------------------------------------------------------------------------

def _curves(scenarios: Sequence[ScenarioData]) -> list[tuple[str, Curve, str]]:
    """(label "GPU layout", curve, concurrency scope) of every distinct curve."""
    out, keys = [], set()
    for s in scenarios:
        rec = s.recommendation
        if rec is None:
            continue
        for curve, scope in ((rec.curve, s.scenario.load.concurrency_scope), (rec.other, "total")):
            if curve is None:
                continue
            label = f"{s.profile.hardware.gpu} {curve.layout}"
            key = (s.profile.name, label, tuple((p.tokens, round(p.step_us["sequential"], 3)) for p in curve.points))
            if key not in keys:
                keys.add(key)
                out.append((label, curve, scope))
    return out


def _total_concurrency(concurrency: int, dp: int, scope: str) -> int:
    return concurrency * dp if scope == "per_dp_rank" else concurrency


def gain_figure(scenarios: Sequence[ScenarioData]) -> go.Figure:
    """Decode-step gain vs sequential against tokens per rank and against concurrency; a line per strategy ×
    (platform, parallelism); stars at the recommended token thresholds."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=(
        "against batch size (tokens per rank per decode step)", "against concurrency (requests, all DP ranks)"))
    for i, (label, curve, scope) in enumerate(_curves(scenarios)):
        dash, symbol = LAYOUT_DASHES[i % len(LAYOUT_DASHES)], LAYOUT_SYMBOLS[i % len(LAYOUT_SYMBOLS)]
        tokens = [p.tokens for p in curve.points]
        conc = [_total_concurrency(p.concurrency, curve.dp, scope) for p in curve.points]
        strategies = [s for s in curve.points[0].step_us if s != "sequential"]
        for strategy in strategies:
            gain = [100 * (p.step_us["sequential"] - p.step_us[strategy]) / p.step_us["sequential"]
                    for p in curve.points]
            for col, xs in ((1, tokens), (2, conc)):
                fig.add_trace(go.Scatter(
                    x=xs, y=gain, mode="lines+markers", name=f"{strategy} · {label}", legendgroup=f"{strategy}{i}",
                    showlegend=col == 1, line={"color": strategy_color(strategy), "dash": dash, "width": 2.2},
                    marker={"symbol": symbol, "size": 7},
                    hovertemplate=f"{strategy} · {label}<br>%{{x}}: %{{y:+.2f}}% vs sequential<extra></extra>"),
                    row=1, col=col)
        threshold = curve.threshold()
        if threshold is not None:
            p = [q for q in curve.points if q.tokens == threshold][-1]
            gain = 100 * p.gain_vs_sequential
            for col, x in ((1, p.tokens), (2, _total_concurrency(p.concurrency, curve.dp, scope))):
                fig.add_trace(go.Scatter(
                    x=[x], y=[gain], mode="markers", name=f"threshold {threshold} tokens/rank · {label}",
                    legendgroup=f"threshold{i}", showlegend=col == 1,
                    marker={"symbol": "star", "size": 16, "color": STRATEGY_COLORS["multi_stream"],
                            "line": {"color": "black", "width": 1}},
                    hovertemplate=f"{label}: multi_stream up to {threshold} tokens/rank "
                                  f"(beats the best alternative by ≥ {curve.margin:.1%})<extra></extra>"),
                    row=1, col=col)
    for col in (1, 2):
        fig.add_hline(y=0, line={"color": STRATEGY_COLORS["sequential"], "width": 2}, row=1, col=col)
    fig.update_xaxes(type="log", dtick=np.log10(2), tickformat="d")
    fig.update_xaxes(title_text="tokens per rank", row=1, col=1)
    fig.update_xaxes(title_text="concurrency (requests in flight)", row=1, col=2)
    fig.update_yaxes(title_text="decode-step gain vs sequential (%)", ticksuffix="%", row=1, col=1)
    fig.update_yaxes(ticksuffix="%", row=1, col=2)
    profiles = "; ".join(sorted({s.profile.describe() for s in scenarios}))
    _layout(fig, f"Gain curves — decode step (TPOT), sequential = 0 ({profiles})", 640, legend="right")
    return fig


def threshold_map_figure(scenarios: Sequence[ScenarioData]) -> go.Figure:
    """Winning strategy (colour) and its margin over the runner-up (text) per concurrency × platform and
    parallelism."""
    import plotly.graph_objects as go

    curves = _curves(scenarios)
    strategies = list(STRATEGY_COLORS) + sorted({s for _, c, _ in curves for p in c.points for s in p.step_us}
                                                - set(STRATEGY_COLORS))
    columns = sorted({_total_concurrency(p.concurrency, c.dp, scope) for _, c, scope in curves for p in c.points})
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for _, curve, scope in curves:
        row_z: list[float | None] = [None] * len(columns)
        row_t = [""] * len(columns)
        for p in curve.points:
            ranked = sorted(p.step_us, key=lambda s: (p.step_us[s], s))
            best = ranked[0]
            margin = (p.step_us[ranked[1]] - p.step_us[best]) / p.step_us[ranked[1]] if len(ranked) > 1 else 0.0
            j = columns.index(_total_concurrency(p.concurrency, curve.dp, scope))
            row_z[j] = strategies.index(best)
            row_t[j] = f"{best}<br>+{100 * margin:.1f}%<br>{p.tokens} tok/rank"
        z.append(row_z)
        text.append(row_t)
    n = len(strategies)
    scale = []
    for i, s in enumerate(strategies):
        scale += [[i / n, strategy_color(s)], [(i + 1) / n, strategy_color(s)]]
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(c) for c in columns], y=[label for label, _, _ in curves], text=text,
        texttemplate="%{text}", textfont={"size": 11}, colorscale=scale, zmin=-0.5, zmax=n - 0.5, showscale=False,
        xgap=2, ygap=2, hovertemplate="%{y}, concurrency %{x}: %{text}<extra></extra>"))
    for s in strategies:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"{s} wins",
                                 marker={"symbol": "square", "size": 14, "color": strategy_color(s)}))
    fig.update_xaxes(title_text="concurrency (requests in flight, all DP ranks)", type="category")
    fig.update_yaxes(title_text="platform and parallelism", type="category", autorange="reversed")
    _layout(fig, "Threshold map — fastest decode step and its margin over the runner-up (% of step time)",
            220 + 80 * max(len(curves), 1))
    return fig


# --- calibration -------------------------------------------------------------------------------------------

def calibration_figure(report: dict[str, Any]) -> go.Figure:
    """Predicted vs measured (y = x, ±3% band) and per-preset signed errors (median, min–max bars)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = report["cases"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, column_widths=[0.5, 0.5], subplot_titles=(
        "predicted vs measured MoE layer time", "signed error per preset and mode (held-out cases)"))
    lo = min(min(r["measured_us"], r["predicted_us"]) for r in rows) * 0.9
    hi = max(max(r["measured_us"], r["predicted_us"]) for r in rows) * 1.1
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo * (1 - BAND), hi * (1 - BAND)], mode="lines",
                             line={"width": 0}, showlegend=False, hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo * (1 + BAND), hi * (1 + BAND)], mode="lines", fill="tonexty",
                             fillcolor="rgba(120,120,120,0.18)", line={"width": 0}, name="±3% band",
                             hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x",
                             line={"color": "#444", "width": 1.5}), row=1, col=1)
    symbols = {"graph": "circle", "eager": "diamond"}
    for strategy in sorted({r["strategy"] for r in rows}, key=_strategy_order):
        for mode in sorted({r["mode"] for r in rows}):
            for split in ("calibration", "validation"):
                sel = [r for r in rows if r["strategy"] == strategy and r["mode"] == mode and r["split"] == split]
                if not sel:
                    continue
                fig.add_trace(go.Scatter(
                    x=[r["measured_us"] for r in sel], y=[r["predicted_us"] for r in sel], mode="markers",
                    name=f"{strategy} · {mode} · {'held out' if split == 'validation' else 'fitted on'}",
                    marker={"color": strategy_color(strategy), "symbol": symbols.get(mode, "square"), "size": 8,
                            "opacity": 1.0 if split == "validation" else 0.35,
                            "line": {"color": "white", "width": 0.5}},
                    customdata=[[r["preset"], r.get("tokens"), 100 * r["error"]] for r in sel],
                    hovertemplate="%{customdata[0]}, %{customdata[1]} tokens: measured %{x:.1f} µs, predicted "
                                  "%{y:.1f} µs (%{customdata[2]:+.1f}%)<extra>" + f"{strategy} {mode}</extra>"),
                    row=1, col=1)
    held = [r for r in rows if r["split"] == "validation"] or rows
    categories = sorted({f"{r['preset']} · {r['mode']}" for r in held})
    for strategy in sorted({r["strategy"] for r in held}, key=_strategy_order):
        med, plus, minus = [], [], []
        for cat in categories:
            errs = [100 * r["error"] for r in held if f"{r['preset']} · {r['mode']}" == cat
                    and r["strategy"] == strategy]
            m = float(np.median(errs)) if errs else None
            med.append(m)
            plus.append(max(errs) - m if errs and m is not None else None)
            minus.append(m - min(errs) if errs and m is not None else None)
        fig.add_trace(go.Bar(x=categories, y=med, name=f"{strategy}: median error (bars: min–max)",
                             marker={"color": strategy_color(strategy)},
                             error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True,
                                      "color": "#333"},
                             hovertemplate="%{x}: median %{y:+.1f}%<extra>" + strategy + "</extra>"),
                      row=1, col=2)
    for y in (100 * BAND, -100 * BAND):
        fig.add_hline(y=y, line={"color": "#777", "dash": "dot"}, row=1, col=2)
    fig.update_xaxes(type="log", title_text="measured (µs per layer)", row=1, col=1)
    fig.update_yaxes(type="log", title_text="predicted (µs per layer)", row=1, col=1)
    fig.update_xaxes(title_text="preset · mode", row=1, col=2)
    fig.update_yaxes(title_text="predicted / measured − 1 (%)", ticksuffix="%", row=1, col=2)
    fig.update_layout(barmode="group")
    _layout(fig, f"Calibration — {report.get('profile', 'profile')}", 640, legend="right")
    return fig


def _strategy_order(strategy: str) -> tuple[int, str]:
    order = list(STRATEGY_COLORS)
    return (order.index(strategy) if strategy in order else len(order), strategy)


# --- hazards -----------------------------------------------------------------------------------------------

def hazards_figure(rows: Sequence[HazardRow]) -> go.Figure:
    """A table of what ``moesim check`` finds in each simulated schedule."""
    import plotly.graph_objects as go

    verdicts = ["clean" if r.clean else f"{len(r.hazards)} race(s), {len(r.capture_errors)} capture error(s)"
                for r in rows]
    findings = ["<br>".join([*r.hazards, *r.capture_errors, *(f"warning: {w}" for w in r.warnings)])
                or "no races; capture legal" for r in rows]
    fill = ["#E6F4EA" if r.clean else "#FDE2E1" for r in rows]
    fig = go.Figure(go.Table(
        columnwidth=[1.3, 1.2, 1.8, 1.3, 4.0],
        header={"values": ["scenario", "schedule", "program checked", "verdict", "findings"],
                "fill_color": "#DDE3EA", "align": "left", "font": {"size": 13}},
        cells={"values": [[r.scenario for r in rows], [r.label for r in rows], [r.program for r in rows],
                          verdicts, findings],
               "fill_color": [fill] * 5, "align": "left", "height": 28, "font": {"size": 12}}))
    _layout(fig, "Hazards — races (happens-before) and graph-capture legality of each simulated schedule",
            180 + 34 * max(len(rows), 1))
    fig.update_layout(margin={"t": 60, "b": 20})
    return fig


# --- sweeps ------------------------------------------------------------------------------------------------

def sweep_figure(document: dict[str, Any]) -> go.Figure:
    """A ``moesim sweep`` document: gain vs sequential and step time against its first numeric axis, a line
    per strategy × the other axes' values."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    axes: dict[str, list[Any]] = document["axes"]
    cases = document["cases"]
    numeric = [a for a, vals in axes.items() if all(isinstance(v, int | float) for v in vals)]
    x_axis = (numeric or list(axes) or [None])[0]
    others = [a for a in axes if a != x_axis]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("decode-step gain vs sequential", "decode-step time (TPOT)"))
    lines: dict[tuple[str, tuple[Any, ...]], list[tuple[Any, float | None, float | None]]] = {}
    for case in cases:
        rest = tuple(case["params"].get(a) for a in others)
        for r in case["results"]:
            name = r["strategy"] + (" + dbo" if r["dbo"] else "")
            lines.setdefault((name, rest), []).append((case["params"].get(x_axis, 0), r["gain_vs_sequential"],
                                                       r["step_us"]))
    combos = sorted({rest for _, rest in lines}, key=str)
    for (name, rest), pts in lines.items():
        dash = LAYOUT_DASHES[combos.index(rest) % len(LAYOUT_DASHES)]
        label = name + "".join(f" · {a}={v}" for a, v in zip(others, rest, strict=True))
        xs = [p[0] for p in pts]
        for col, ys in ((1, [None if g is None else 100 * g for _, g, _ in pts]),
                        (2, [None if s is None else s / 1000 for _, _, s in pts])):
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=label, legendgroup=label,
                                     showlegend=col == 1, line={"color": strategy_color(name), "dash": dash,
                                                                "width": 2.2}), row=1, col=col)
    if x_axis in numeric and all(v > 0 for v in axes[x_axis]):
        fig.update_xaxes(type="log")
    fig.update_xaxes(title_text=str(x_axis))
    fig.update_yaxes(title_text="gain vs sequential (%)", ticksuffix="%", row=1, col=1)
    fig.update_yaxes(title_text="step time (ms)", row=1, col=2)
    profile = cases[0]["profile"]["describe"] if cases else "no cases"
    _layout(fig, f"Sweep — {document.get('scenario', '')} ({profile})", 600, legend="right")
    return fig
