"""Move the kernels launched inside every ``record_function(NAME)`` range to an aux stream.

Per range instance: at its first item the host records a fork event on the main stream, makes the aux stream
wait on it and switches to aux; the range's kernels go to aux in their traced host order; after its last
kernel the host records a join event on aux and switches back. Main waits on the join event after the last
kernel of the next ``join_after`` range, else before the first later kernel launched outside every range that
does not enclose NAME (the combine step), or earlier, before a kernel whose operator takes a tensor of the
region's (distinctive) output shape. Added host calls cost the profile's eager figures; nothing in graph mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from simulator.errors import InputError
from simulator.kineto.events import CpuOp
from simulator.kineto.program import HostTrace, Item, LaunchMode
from simulator.profile import Profile

AUX = "aux"


@dataclass(slots=True)
class Move:
    """The rewritten item list and what was done, in words."""

    items: list[Item]
    instances: int = 0
    moved: int = 0
    notes: list[str] = field(default_factory=list)


def region_names(host: HostTrace) -> list[str]:
    return sorted({r.name for r in host.ranges})


def move_region(host: HostTrace, name: str, profile: Profile, launch: LaunchMode,
                join_after: str | None = None) -> Move:
    """The what-if program items: every ``name`` range's kernels on ``aux``, with fork and join events."""
    instances = [i for i, r in enumerate(host.ranges) if r.name == name]
    if not instances:
        raise InputError(f"no record_function range named {name!r} on the replayed thread; ranges: "
                         f"{', '.join(region_names(host)) or 'none'}")
    if join_after is not None and not any(r.name == join_after for r in host.ranges):
        raise InputError(f"no record_function range named {join_after!r} (--join-after); ranges: "
                         f"{', '.join(region_names(host))}")
    eager = launch != "graph"
    fig = profile.host
    cost = {"record": fig.record_us.value if eager else 0.0, "wait": fig.wait_us.value if eager else 0.0,
            "set_stream": fig.set_stream_us.value if eager else 0.0}
    items = host.items
    before: dict[int, list[Item]] = {}
    restream: dict[int, str] = {}
    result = Move(items=[])
    for k, index in enumerate(instances):
        members = [n for n, it in enumerate(items) if it.kind == "launch" and index in it.ranges]
        if not members:
            result.notes.append(f"range {name!r} #{k} launched no GPU work; left as is")
            continue
        first, last = members[0], members[-1]
        main = items[first].stream
        fork, join = f"fork{k}", f"join{k}"
        before.setdefault(first, []).extend([
            Item("record", main, cost=cost["record"], event=fork),
            Item("wait", AUX, cost=cost["wait"], event=fork),
            Item("set_stream", AUX, cost=cost["set_stream"]),
        ])
        for n in members:
            if items[n].stream == main:
                restream[n] = AUX
        before.setdefault(last + 1, []).extend([
            Item("record", AUX, cost=cost["record"], event=join),
            Item("set_stream", main, cost=cost["set_stream"]),
        ])
        at, why = _join_point(host, index, last, join_after)
        consumer = _early_consumer(host, index, members, last, at)
        if consumer is not None:
            at, why = consumer
        if why:
            result.notes.append(f"range {name!r} #{k}: {why}")
        before.setdefault(at, []).append(Item("wait", main, cost=cost["wait"], event=join))
        result.instances += 1
        result.moved += sum(1 for n in members if n in restream)
    out: list[Item] = []
    for n, item in enumerate(items):
        out.extend(before.get(n, ()))
        out.append(replace(item, stream=restream[n]) if n in restream else item)
    out.extend(before.get(len(items), ()))
    result.items = out
    return result


def _join_point(host: HostTrace, index: int, last: int, join_after: str | None) -> tuple[int, str | None]:
    """Item index main waits before, and a note when it is not the default combine point."""
    items = host.items
    ranges = host.ranges
    region = ranges[index]
    if join_after is not None:
        later = [j for j, r in enumerate(ranges) if r.name == join_after and r.ts >= region.end]
        for j in later:
            inside = [n for n, it in enumerate(items) if it.kind == "launch" and j in it.ranges and n > last]
            if inside:
                return inside[-1] + 1, None
        raise InputError(f"no range {join_after!r} with GPU work follows the {region.name!r} range at "
                         f"{region.ts:.3f} µs (--join-after)")
    ancestors = {j for j, r in enumerate(ranges) if r.ts <= region.ts and r.end >= region.end and j != index}
    for n in range(last + 1, len(items)):
        item = items[n]
        if item.kind == "launch" and set(item.ranges) <= ancestors:
            return n, None
    return len(items), "no later kernel outside the annotated ranges; joined at the end of the trace"


def _early_consumer(host: HostTrace, index: int, members: list[int], last: int,
                    at: int) -> tuple[int, str] | None:
    """A kernel before the join point whose operator takes the region's output, when shapes show it."""
    items = host.items
    ops = [items[n].cpu for n in members if items[n].cpu is not None]
    shape = _output_shape(ops[-1]) if ops else None
    if shape is None:
        return None
    if any(shape in (o.dims if o else ()) for o in ops):
        return None  # not distinctive: the region also reads tensors of that shape
    for n in range(last + 1, at):
        item = items[n]
        if item.kind != "launch" or index in item.ranges:
            continue
        for op in (item.cpu, item.outer_cpu):
            if op is not None and shape in op.dims:
                label = item.gpu.name if item.gpu else "?"
                return n, (f"joined early, before {label!r} (launched by {op.name}): it reads a tensor of "
                           f"the region's output shape {list(shape)}")
    return None


def _output_shape(op: CpuOp) -> tuple[int, ...] | None:
    """Output shape of an aten operator from its input shapes (matmul family and shape-preserving ops)."""
    dims = [d for d in op.dims if d]
    if not dims:
        return None
    base = op.name.split("::")[-1].lower()
    if base in ("mm", "matmul", "linear", "bmm"):
        if len(dims) < 2 or len(dims[0]) < 2 or len(dims[1]) < 2:
            return None
        n = dims[1][-2] if base == "linear" else dims[1][-1]
        return (*dims[0][:-1], n)
    if base in ("addmm",):
        return (dims[1][0], dims[2][-1]) if len(dims) >= 3 and len(dims[1]) == 2 and len(dims[2]) == 2 else None
    return dims[0]
