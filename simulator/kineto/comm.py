"""Communication kernels are waits, not work.

A collective kernel (NCCL, vLLM's custom all-reduce, DeepEP / MoRI dispatch and combine) ends when the slowest
peer has arrived and the payload has crossed the link: in a replay its end is bounded below by the time its
peers are all there (on one rank: its traced end; across ranks: the last rank's arrival, see
:mod:`simulator.kineto.ranks`) and by its own start plus a transfer time from the profile's link figures,
and while it waits it holds few SMs (``COMM_SM``), so work on another stream fills the device.

The bound is replayed with a ``peers`` stream of zero-demand placeholder kernels whose chain ends at each
collective's bound minus its transfer time; an event recorded after each placeholder is waited on by the
collective's stream before it, and the collective then runs for its transfer time. Placeholders are issued
``AHEAD`` collectives in advance (a host that far behind its device would delay the bound).
"""

from __future__ import annotations

import math
import re

from simulator.kineto.demand import Demand
from simulator.kineto.events import CpuOp, GpuOp
from simulator.kineto.program import Item
from simulator.profile import Profile
from simulator.workloads.collectives import COMM_SM

PEERS = "peers"
AHEAD = 64
_COMM = re.compile(r"nccl|cross_device_reduce|deep_?ep::|mori::|all_?reduce|all_?to_?all|all_?gather|"
                   r"reduce_?scatter|sendrecv", re.IGNORECASE)
_WIDTH = {"float": 4, "float32": 4, "c10::half": 2, "c10::bfloat16": 2, "double": 8, "long int": 8, "int": 4,
          "c10::float8_e4m3fn": 1, "unsigned char": 1, "signed char": 1}


def is_comm(name: str) -> bool:
    """Whether a kernel name is a collective's (NCCL, custom all-reduce, DeepEP, MoRI, …)."""
    return _COMM.search(name) is not None


def mark_comm(items: list[Item], profile: Profile) -> int:
    """Give every collective launch its transfer time (``transfer_us``) and a waiting kernel's demand; returns
    how many. Wire bytes: the launching operator's first input (shapes recorded) times two for an all-reduce
    (the ring's 2·(n−1)/n at large n), else link latency only."""
    link = profile.link
    count = 0
    for item in items:
        gpu = item.gpu
        if item.kind != "launch" or gpu is None or gpu.kind != "kernel" or not is_comm(gpu.name):
            continue
        wire = _payload(item.cpu or item.outer_cpu) * (2.0 if "reduce" in gpu.name.lower() else 1.0)
        item.transfer_us = link.latency_us.value + wire / (link.bandwidth_GBps.value * 1e3)
        family = item.demand.family if item.demand is not None else "comm"
        item.demand = Demand(COMM_SM, 0.0, 0.0, family, wire or None, None)
        item.contended = False
        count += 1
    return count


def _payload(op: CpuOp | None) -> float:
    if op is None or not op.dims or not op.dims[0]:
        return 0.0
    width = _WIDTH.get(op.types[0].lower(), 2) if op.types else 2
    return float(math.prod(op.dims[0])) * width


def bound_comm(items: list[Item], bounds: list[float], first_issue: float, gap: float) -> list[Item]:
    """``items`` with the peers' placeholder chain: collective ``k`` (in host order) cannot end before
    ``bounds[k]`` (simulated clock). ``first_issue``: when the host issues the first op; ``gap``: the device
    gap before a kernel on a stream (the engine's)."""
    comm = [n for n, item in enumerate(items) if item.transfer_us is not None]
    if not comm:
        return items
    before: dict[int, list[Item]] = {}
    end = first_issue
    for k, n in enumerate(comm):
        transfer = items[n].transfer_us or 0.0
        arrive = bounds[k] - transfer - gap
        dur = max(0.0, arrive - end - gap)
        end += gap + dur
        at = 0 if k < AHEAD else comm[k - AHEAD] + 1
        event = f"{PEERS}{k}"
        before.setdefault(at, []).extend([
            Item("launch", PEERS, gpu=GpuOp("kernel", "peers arrive", -1, -1, 0.0, dur, None),
                 demand=Demand(0.0, 0.0, 0.0, "comm", None, None)),
            Item("record", PEERS, event=event),
        ])
        before.setdefault(n, []).append(Item("wait", items[n].stream, event=event))
    out: list[Item] = []
    for n, item in enumerate(items):
        out.extend(before.get(n, ()))
        out.append(item)
    return out


def traced_bounds(items: list[Item], anchor: float) -> list[float]:
    """Each collective's traced end on the simulated clock (``anchor``: the trace time of simulated 0)."""
    return [item.gpu.ts + item.gpu.dur - anchor for item in items
            if item.transfer_us is not None and item.gpu is not None]
