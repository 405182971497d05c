"""Move the kernels launched inside every selected range (a ``record_function(NAME)`` range or a module call, see
:mod:`simulator.kineto.select`) to an aux stream.

Per selected instance: at its first item the host records a fork event on the main stream, makes the aux stream
wait on it and switches to aux; the range's kernels go to aux in their traced host order; after its last
kernel the host records a join event on aux and switches back. Main waits on the join event after the last
kernel of the next ``join_after`` range or call, else before the first later kernel launched outside every range
that does not enclose the selected one (the combine step), or earlier, before a kernel whose operator takes a
tensor of the region's (distinctive) output shape. Added host calls cost the profile's eager figures; nothing in
graph mode.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field, replace

from simulator.errors import InputError
from simulator.kineto.events import CpuOp
from simulator.kineto.program import HostTrace, Item, LaunchMode
from simulator.kineto.select import Selector, layer_period, select
from simulator.profile import Profile

AUX = "aux"


@dataclass(slots=True)
class Move:
    """The rewritten item list and what was done, in words."""

    items: list[Item]
    instances: int = 0
    moved: int = 0
    notes: list[str] = field(default_factory=list)


def move_region(host: HostTrace, what: Selector, profile: Profile, launch: LaunchMode,
                join_after: Selector | None = None) -> Move:
    """The what-if program items: the kernels of every range ``what`` selects on ``aux``, with fork and join
    events. Linear in the items: each range's kernels are collected in one pass, and the search for a join
    point stops at the next instance's first kernel."""
    instances = select(host, what)
    joins = select(host, join_after) if join_after is not None else []
    items = host.items
    members = _members(items, {*instances, *joins})
    plans: list[tuple[list[int], int]] = []
    notes: list[str] = []
    firsts = [members[i][0] for i in instances if members.get(i)]
    joined = 0  # joins[joined:] start after the instance being placed
    for k, index in enumerate(instances):
        mine = members.get(index)
        if not mine:
            notes.append(f"{what.text!r} #{k} launched no GPU work; left as is")
            continue
        first, last = mine[0], mine[-1]
        after = bisect_right(firsts, last)
        bound = firsts[after] if after < len(firsts) else len(items)  # the next instance's first kernel
        if join_after is not None:
            joined, at = _join_after(host, index, last, joins, joined, members, join_after)
            why = None
        else:
            at, why = _join_point(host, index, first, last, bound)
        consumer = _early_consumer(host, index, mine, last, at)
        if consumer is not None:
            at, why = consumer
        if why:
            notes.append(f"{what.text!r} #{k}: {why}")
        plans.append((mine, at))
    return _rewrite(items, plans, profile, launch, notes)


def move_kernels(host: HostTrace, runs: list[tuple[int, int]], join_after: list[int] | None, profile: Profile,
                 launch: LaunchMode) -> Move:
    """``--aux-kernels``: in every period of the trace's GPU op sequence (:func:`layer_period`), the ops at
    positions ``a..b`` of each run on ``aux``; main waits after position ``join_after[i]`` of run ``i``
    (default, one run only: before the period's last op)."""
    items = host.items
    launches = [n for n, item in enumerate(items) if item.kind == "launch"]
    period = layer_period([_name(items[n]) for n in launches])
    if period == len(launches):
        raise InputError(f"--aux-kernels: the {len(launches)} GPU ops hold no repeating period (a layer or step "
                         "replayed several times); give the eager trace of the same steps as TRACE and this one "
                         "with --durations-from")
    top = max(b for _, b in runs)
    if top >= period:
        raise InputError(f"--aux-kernels: position {top} is outside the period of {period} GPU ops found (0-"
                         f"{period - 1}); --list-modules prints them")
    if join_after is None:
        if len(runs) > 1:
            raise InputError("--aux-kernels with several runs needs --join-after-kernel, one position per run")
        join_after = [period - 2]
    if len(join_after) != len(runs) or any(not b <= j < period for (_, b), j in zip(runs, join_after, strict=False)):
        raise InputError(f"--join-after-kernel: one position per run of --aux-kernels, each at or after its run's "
                         f"end and inside the period (0-{period - 1})")
    plans = [([launches[start + i] for i in range(a, b + 1)], launches[start + j] + 1)
             for start in range(0, len(launches), period) for (a, b), j in zip(runs, join_after, strict=True)]
    notes = [f"GPU op sequence: {len(launches) // period} periods of {period} ops; positions "
             + ", ".join(f"{a}-{b} joined after {j}" for (a, b), j in zip(runs, join_after, strict=True))]
    return _rewrite(items, plans, profile, launch, notes)


def _name(item: Item) -> str:
    return item.gpu.name if item.gpu is not None else ""


def _rewrite(items: list[Item], plans: list[tuple[list[int], int]], profile: Profile, launch: LaunchMode,
             notes: list[str]) -> Move:
    """``items`` with each plan's ops (item indices) on ``aux``: a fork before the first, a join recorded after
    the last, main waiting on it before item index ``at``."""
    eager = launch != "graph"
    fig = profile.host
    cost = {"record": fig.record_us.value if eager else 0.0, "wait": fig.wait_us.value if eager else 0.0,
            "set_stream": fig.set_stream_us.value if eager else 0.0}
    before: dict[int, list[Item]] = {}
    restream: dict[int, str] = {}
    result = Move(items=[], notes=notes)
    for k, (mine, at) in enumerate(plans):
        first, last = mine[0], mine[-1]
        main = items[first].stream
        fork, join = f"fork{k}", f"join{k}"
        before.setdefault(first, []).extend([
            Item("record", main, cost=cost["record"], event=fork),
            Item("wait", AUX, cost=cost["wait"], event=fork),
            Item("set_stream", AUX, cost=cost["set_stream"]),
        ])
        for n in mine:
            if items[n].stream == main:
                restream[n] = AUX
        before.setdefault(last + 1, []).extend([
            Item("record", AUX, cost=cost["record"], event=join),
            Item("set_stream", main, cost=cost["set_stream"]),
        ])
        before.setdefault(at, []).append(Item("wait", main, cost=cost["wait"], event=join))
        result.instances += 1
        result.moved += sum(1 for n in mine if n in restream)
    out: list[Item] = []
    for n, item in enumerate(items):
        out.extend(before.get(n, ()))
        out.append(replace(item, stream=restream[n]) if n in restream else item)
    out.extend(before.get(len(items), ()))
    result.items = out
    return result


def _members(items: list[Item], wanted: set[int]) -> dict[int, list[int]]:
    """For each range in ``wanted``: the indices of the items that launch GPU work inside it, in order."""
    out: dict[int, list[int]] = {}
    for n, item in enumerate(items):
        if item.kind == "launch":
            for j in item.ranges:
                if j in wanted:
                    out.setdefault(j, []).append(n)
    return out


def _join_after(host: HostTrace, index: int, last: int, joins: list[int], start: int,
                members: dict[int, list[int]], sel: Selector) -> tuple[int, int]:
    """(where the next search starts in ``joins``, the item index main waits before): after the last kernel of
    the first ``sel`` range that starts after the region and launches GPU work after its last kernel."""
    region = host.ranges[index]
    while start < len(joins) and host.ranges[joins[start]].ts < region.ts + region.dur:
        start += 1
    for j in joins[start:]:
        inside = [n for n in members.get(j, ()) if n > last]
        if inside:
            return start, inside[-1] + 1
    raise InputError(f"no {sel.text!r} with GPU work follows the {region.name!r} call at {region.ts:.3f} µs "
                     f"({sel.option})")


def _join_point(host: HostTrace, index: int, first: int, last: int, bound: int) -> tuple[int, str | None]:
    """Item index main waits before (the first later kernel outside every range that does not enclose the
    region, looked for up to ``bound``), and a note when it is not that default."""
    items = host.items
    ranges = host.ranges
    region = ranges[index]
    ancestors = {j for j in items[first].ranges
                 if j != index and ranges[j].ts <= region.ts and ranges[j].end >= region.end}
    for n in range(last + 1, bound):
        item = items[n]
        if item.kind == "launch" and ancestors.issuperset(item.ranges):
            return n, None
    if bound < len(items):
        return bound, "no kernel outside the annotated ranges before the next instance; joined before it"
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


def serialize_aux(host: HostTrace) -> Move:
    """The reverse what-if: every GPU op of the trace on its main stream (the one with the most), in traced host
    order, without the cross-stream event records and waits (on one stream they order nothing). Ops that
    overlapped another stream in the trace keep their traced durations, which include that contention: the
    serialized time is high by their slowdown."""
    launches = [item for item in host.items if item.kind == "launch"]
    counts = Counter(item.stream for item in launches)
    if len(counts) < 2:
        raise InputError(f"--serialize-aux: the trace's GPU work is on one stream ({', '.join(map(str, counts))}): "
                         "nothing to serialize")
    main = counts.most_common(1)[0][0]
    out: list[Item] = []
    moved = 0
    for item in host.items:
        if item.kind in ("record", "wait", "set_stream"):
            continue
        if item.kind == "launch":
            moved += item.stream != main
            item = replace(item, stream=main, contended=False, blocked_us=0.0)
        out.append(item)
    note = (f"{moved} GPU ops of streams {', '.join(str(s) for s in counts if s != main)} moved onto stream "
            f"{main} in host order; event records and waits dropped")
    contended = sum(1 for item in launches if item.contended)
    if contended:
        note += (f"; {contended} ops overlapped another stream in the trace and keep their traced (slowed) "
                 "durations: the serialized time is high by that slowdown")
    return Move(items=out, instances=len(counts) - 1, moved=moved, notes=[note])
