"""Several ranks' traces (vLLM writes one per rank): replayed together, aligned at their collectives.

The ``k``-th collective kernel of every rank (host order) is the same collective. Clocks are aligned on them:
a collective ends on every rank at once, so rank ``r``'s clock is rank 0's shifted by the median difference of
their traced collective ends. Then, for the baseline and for the what-if alike, the ranks are replayed with
each collective bounded by the last rank's arrival there (when it could start) plus its transfer time
(:mod:`comm`): first without peers (each rank's own arrivals), then with the bounds those arrivals give, until
no bound moves (each round can only delay later arrivals, so the bounds only grow). The step lasts as long as
the slowest rank's span.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from simulator.engine import simulate
from simulator.errors import InputError
from simulator.ir import gc_paused
from simulator.kineto.comm import PEERS, mark_comm
from simulator.kineto.program import HostTrace, Item, LaunchMode, compile_program, drop_operators
from simulator.kineto.replay import SharingForm, gpu_span, load_host, selectors, sharing_model
from simulator.kineto.whatif import move_region
from simulator.kineto.whatif import serialize_aux as serialize_aux_streams
from simulator.profile import Profile
from simulator.result import SimResult
from simulator.sharing import SharingModel

ROUNDS = 100


@dataclass(slots=True)
class Rank:
    path: str
    host: HostTrace
    items: list[Item]  # the baseline's
    moved: list[Item] | None  # the what-if's
    offset_us: float  # add to this rank's trace clock to get rank 0's


def run_ranks(paths: list[str | Path], region: str | None = None, *, module: str | None = None,
              join_after: str | None = None, join_after_module: str | None = None, serialize_aux: bool = False,
              launch: LaunchMode = "as-traced", profile: str | None = None, progress: bool = True,
              sharing: SharingForm = "placement") -> dict[str, Any]:
    """Per rank and for the step (the slowest rank): the baseline span and, when something is selected, the
    what-if's; the collectives aligned across ranks. ``sharing`` as in ``run_whatif``."""
    what, join = selectors(region, module, join_after, join_after_module)
    with gc_paused():
        prof: Profile | None = None
        ranks: list[Rank] = []
        for path in paths:
            trace, prof, host = load_host(path, profile, progress=progress)
            del trace
            mark_comm(host.items, prof)
            move = serialize_aux_streams(host) if serialize_aux else \
                move_region(host, what, prof, launch, join) if what is not None else None
            drop_operators(host.items, move.items if move is not None else [])
            ranks.append(Rank(str(path), host, host.items, move.items if move is not None else None, 0.0))
        assert prof is not None
        _align(ranks)
        model = sharing_model(prof, sharing)
        base, base_rounds = _replay(ranks, [r.items for r in ranks], prof, launch, "baseline", progress, model)
        whatif, what_rounds = (_replay(ranks, [r.moved or [] for r in ranks], prof, launch, "what-if", progress,
                                       model) if ranks[0].moved is not None else (None, 0))
    rows = []
    for n, rank in enumerate(ranks):
        rows.append({"trace": rank.path, "measured_us": round(rank.host.measured_us, 3),
                     "baseline_us": round(gpu_span(base[n]), 3),
                     "whatif_us": None if whatif is None else round(gpu_span(whatif[n]), 3),
                     "clock_offset_us": round(rank.offset_us, 3)})
    step_base = max(row["baseline_us"] for row in rows)
    step_what = None if whatif is None else max(row["whatif_us"] for row in rows)
    return {"ranks": rows, "step_baseline_us": step_base, "step_whatif_us": step_what,
            "step_gain": None if step_what is None or step_base <= 0 else round(1 - step_what / step_base, 5),
            "collectives": _count(ranks[0].items), "rounds": {"baseline": base_rounds, "whatif": what_rounds},
            "selected": None if what is None else what.text, "serialize_aux": serialize_aux, "launch": launch,
            "profile": prof.describe(), "sharing_form": sharing,
            "note": "each rank's collectives end when the last rank arrives there plus a transfer time from the "
                    "profile's link figures; no multi-GPU trace was measured to check this"}


def _count(items: list[Item]) -> int:
    return sum(1 for item in items if item.transfer_us is not None)


def _ends(items: list[Item]) -> list[float]:
    return [item.gpu.ts + item.gpu.dur for item in items if item.transfer_us is not None and item.gpu is not None]


def _align(ranks: list[Rank]) -> None:
    """Each rank's clock offset to rank 0's, from their traced collective ends; refused unless every rank
    holds the same number of collectives."""
    ends = [_ends(rank.items) for rank in ranks]
    counts = {len(e) for e in ends}
    if len(counts) > 1 or not ends[0]:
        raise InputError("ranks are aligned at their collectives: every trace must hold the same number of "
                         f"collective kernels (NCCL, custom all-reduce, DeepEP, …); found "
                         f"{', '.join(str(len(e)) for e in ends)}")
    for rank, mine in zip(ranks, ends, strict=True):
        rank.offset_us = statistics.median(a - b for a, b in zip(ends[0], mine, strict=True))


def _replay(ranks: list[Rank], programs: list[list[Item]], profile: Profile, launch: LaunchMode, label: str,
            progress: bool, sharing: SharingModel) -> tuple[list[SimResult], int]:
    """Every rank replayed with collective bounds from all ranks' arrivals, repeated until they settle (a bar
    on stderr counts the rounds, on a terminal)."""
    bounds: list[float] = [float("-inf")] * _count(programs[0])
    for rounds in tqdm(range(1, ROUNDS + 1), desc=f"{label}: rounds over {len(ranks)} ranks", file=sys.stderr,
                       disable=True if not progress else None, leave=False):
        results, arrivals = [], []
        for rank, items in zip(ranks, programs, strict=True):
            anchor = _anchor(rank.host, profile, launch)
            local = [b - anchor - rank.offset_us for b in bounds]
            result = simulate(compile_program(rank.host, items, profile, launch, comm_bounds=local), sharing)
            results.append(result)
            arrivals.append([run.start_us + anchor + rank.offset_us for run in _comm_runs(result, items)])
        transfer = [item.transfer_us or 0.0 for item in programs[0] if item.transfer_us is not None]
        new = [max(a[k] for a in arrivals) + transfer[k] for k in range(len(bounds))]
        if all(abs(a - b) < 1e-6 for a, b in zip(new, bounds, strict=True)):
            return results, rounds
        bounds = new
    raise InputError(f"the ranks' collective bounds did not settle in {ROUNDS} rounds")


def _anchor(host: HostTrace, profile: Profile, launch: LaunchMode) -> float:
    """The trace time of this rank's simulated 0, as ``compile_program`` sets it."""
    if launch == "graph":
        costs = profile.host_costs("graph")
        return host.gpu_start - costs.replay_us - costs.kernel_gap_us
    return host.origin_us


def _comm_runs(result: SimResult, items: list[Item]) -> list[Any]:
    """The collectives' kernel runs, in host order (the placeholders excluded)."""
    names = {item.gpu.name for item in items if item.transfer_us is not None and item.gpu is not None}
    runs = [run for run in result.kernels if run.stream != PEERS and run.name in names]
    return sorted(runs, key=lambda run: run.index)
