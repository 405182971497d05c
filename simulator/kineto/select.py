"""What a what-if moves and joins after: ``record_function`` ranges by name, or module calls by class path.

A module PATH is ``/``-separated class names matched as a suffix of a call's module nesting, instance numbers
ignored: ``DeepseekV2MoE/DeepseekV2MLP`` selects the MLP called inside every ``DeepseekV2MoE`` and not the
dense layers' MLP of the same class. Of nested matches only the outermost call is kept.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from simulator.errors import InputError
from simulator.kineto.program import HostTrace

_INSTANCE = re.compile(r"_\d+$")
WITH_STACK = ("record the trace with torch.profiler.profile(with_stack=True) (vLLM's torch profiler has "
              "torch_profiler_with_stack on by default)")
OPTIONS = {("range", False): "--aux-region", ("module", False): "--aux-module", ("range", True): "--join-after",
           ("module", True): "--join-after-module"}


@dataclass(frozen=True, slots=True)
class Selector:
    """A ``record_function`` range name (``range``) or a module class path (``module``)."""

    kind: Literal["range", "module"]
    text: str
    join: bool = False  # the join-after selector (only named so in messages)

    @property
    def option(self) -> str:
        return OPTIONS[(self.kind, self.join)]


def module_parts(path: str) -> list[str]:
    """The class names of a module PATH (instance numbers dropped); one ``InputError`` for an empty one."""
    parts = [_INSTANCE.sub("", p.strip()) for p in path.split("/") if p.strip()]
    if not parts:
        raise InputError(f"empty module path {path!r}: give class names separated by '/', e.g. "
                         "DeepseekV2MoE/DeepseekV2MLP")
    return parts


def select(host: HostTrace, sel: Selector) -> list[int]:
    """Indices into ``host.ranges`` of the outermost ranges ``sel`` matches (in time order); an ``InputError``
    naming what there is when none does."""
    ranges = host.ranges
    if sel.kind == "range":
        hits = [i for i, r in enumerate(ranges) if r.kind == "range" and r.name == sel.text]
    else:
        parts = module_parts(sel.text)
        n = len(parts)
        hits = [i for i, r in enumerate(ranges) if r.kind == "module" and r.name.split("/")[-n:] == parts]
    outer: list[int] = []
    end = float("-inf")
    for i in hits:
        if ranges[i].ts + ranges[i].dur <= end:
            continue  # inside a match already kept
        outer.append(i)
        end = ranges[i].ts + ranges[i].dur
    if not outer:
        raise InputError(_none_found(host, sel))
    return outer


def _none_found(host: HostTrace, sel: Selector) -> str:
    names = sorted({r.name for r in host.ranges if r.kind == "range"})
    modules = any(r.kind == "module" for r in host.ranges)
    graph = (f"; its {host.graph_ops} GPU ops launched by CUDA-graph replays carry no ranges or module calls: "
             "pass the eager trace of the same steps as TRACE and this one with --durations-from (and --launch "
             "graph)") if host.graph_ops else ""
    if sel.kind == "range":
        return (f"no record_function range named {sel.text!r} ({sel.option}) on the replayed thread; ranges: "
                f"{', '.join(names) or 'none'}" + ("; module calls: see --list-modules, select with --aux-module"
                                                   if modules else "") + graph)
    if not modules:
        return (f"no module calls on the replayed thread for {sel.option} {sel.text!r}: {WITH_STACK}"
                + (f"; ranges: {', '.join(names)} (--aux-region)" if names else "") + graph)
    return (f"no module call path ends with {sel.text!r} ({sel.option}); see --list-modules for the class paths "
            "in this trace")


def layer_period(names: list[str]) -> int:
    """The shortest period of ``names`` that repeats it whole (its length when none does): the prefix
    function's border, O(n)."""
    n = len(names)
    border = [0] * n
    k = 0
    for i in range(1, n):
        while k and names[i] != names[k]:
            k = border[k - 1]
        if names[i] == names[k]:
            k += 1
        border[i] = k
    period = n - border[-1] if n else 0
    return period if n and n % period == 0 else n


@dataclass(slots=True)
class ModuleRow:
    path: str
    calls: int = 0
    gpu_ops: int = 0
    gpu_us: float = 0.0


def module_tree(host: HostTrace) -> list[ModuleRow]:
    """Every module class path of the replayed thread, depth-first in order of first call: its calls, and the
    GPU ops launched inside it (inclusive of nested calls) with their traced time."""
    rows: dict[str, ModuleRow] = {}
    children: dict[str, list[str]] = defaultdict(list)
    for r in host.ranges:
        if r.kind != "module":
            continue
        if r.name not in rows:
            rows[r.name] = ModuleRow(r.name)
            children[r.name.rpartition("/")[0]].append(r.name)
        rows[r.name].calls += 1
    for item in host.items:
        if item.gpu is None:
            continue
        for j in item.ranges:
            row = rows.get(host.ranges[j].name) if host.ranges[j].kind == "module" else None
            if row is not None:
                row.gpu_ops += 1
                row.gpu_us += item.gpu.dur
    out: list[ModuleRow] = []
    todo = list(reversed(children[""]))
    while todo:
        path = todo.pop()
        out.append(rows[path])
        todo.extend(reversed(children[path]))
    return out


def listing(host: HostTrace) -> dict[str, Any]:
    """``--list-modules`` as data: the module tree and the ``record_function`` ranges with their counts."""
    counts: dict[str, int] = defaultdict(int)
    for r in host.ranges:
        if r.kind == "range":
            counts[r.name] += 1
    return {"thread": host.thread, "device": host.device,
            "modules": [{"path": m.path, "calls": m.calls, "gpu_ops": m.gpu_ops, "gpu_us": round(m.gpu_us, 3)}
                        for m in module_tree(host)],
            "ranges": [{"name": name, "count": n} for name, n in sorted(counts.items())],
            "graph_ops": host.graph_ops, "period": _period(host)}


def _period(host: HostTrace) -> dict[str, Any]:
    """The GPU op sequence's shortest repeating period and, when it repeats, its ops by position (for
    ``--aux-kernels``)."""
    names = [item.gpu.name for item in host.items if item.kind == "launch" and item.gpu is not None]
    period = layer_period(names)
    repeats = len(names) // period if period else 0
    return {"repeats": repeats, "ops": names[:period] if repeats > 1 else []}  # no period: nothing to pick from


def render_listing(data: dict[str, Any]) -> str:
    """The ``--list-modules`` text: the module tree (indented by nesting) and the ranges."""
    lines = [f"module calls on thread {data['thread']} (device {data['device']}): class paths, instance numbers "
             "dropped; calls, GPU ops launched inside (nested calls included) and their traced time"]
    for m in data["modules"]:
        depth = m["path"].count("/")
        name = "  " * depth + m["path"].rpartition("/")[2]
        lines.append(f"  {name:<56} {m['calls']:>7} calls {m['gpu_ops']:>8} GPU ops {m['gpu_us']:>14.3f} µs")
    if not data["modules"]:
        lines.append(f"  none: {WITH_STACK}")
    if data["ranges"]:
        lines.append("record_function ranges (--aux-region / --join-after): "
                     + ", ".join(f"{r['name']} ×{r['count']}" for r in data["ranges"]))
    if data["graph_ops"]:
        lines.append(f"{data['graph_ops']} GPU ops were launched by CUDA-graph replays: no module calls around them "
                     "(give the eager trace of the same steps, this one with --durations-from)")
    period = data["period"]
    if period["repeats"] > 1 and (data["graph_ops"] or not data["modules"]):
        lines.append(f"GPU op sequence: {period['repeats']} repeats of a period of {len(period['ops'])} ops "
                     "(--aux-kernels A-B, --join-after-kernel J pick by position):")
        lines += [f"  {n:4d}  {name[:100]}" for n, name in enumerate(period["ops"])]
    lines.append("select with --aux-module PATH, PATH a suffix of a path above, e.g. DeepseekV2MoE/DeepseekV2MLP")
    return "\n".join(lines)
