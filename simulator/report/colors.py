"""One colour per strategy and one per stream role, shared by every figure of the report."""

from __future__ import annotations

STRATEGY_COLORS = {
    "sequential": "#4C78A8",
    "multi_stream": "#F58518",
    "fused_shared": "#54A24B",
}
STREAM_COLORS = {
    "host": "#B279A2",
    "main": "#72B7B2",
    "aux": "#E45756",
    "communication": "#EECA3B",
}
_EXTRA = ("#9D755D", "#BAB0AC", "#FF9DA6", "#83BCFF", "#8CD17D")
LAYOUT_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
LAYOUT_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x")


def strategy_color(strategy: str) -> str:
    """The strategy's colour (a `` + dbo`` suffix keeps its strategy's colour)."""
    base = strategy.split(" ")[0]
    return STRATEGY_COLORS.get(base, _EXTRA[sum(map(ord, base)) % len(_EXTRA)])


def stream_role(stream: str) -> str:
    """``host``, ``main``, ``aux``, ``communication`` or the stream's own name."""
    name = stream.lower()
    if name.startswith("comm") or "nccl" in name or "rccl" in name:
        return "communication"
    for role in ("host", "main", "aux"):
        if name.startswith(role):
            return role
    return stream


def stream_color(stream: str) -> str:
    role = stream_role(stream)
    return STREAM_COLORS.get(role, _EXTRA[sum(map(ord, role)) % len(_EXTRA)])
