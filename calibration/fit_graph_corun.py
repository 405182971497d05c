"""Fit the co-run (sharing) model to the decode-regime co-runs measured inside CUDA graphs
(``calibration.microbench.graph_corun``), and measure the graph fork/join cost.

Each measured configuration (preset or TP shard, token count) becomes simulated graphs of the same pieces:
the workload emitter's kernels for the shared experts (S), the routing chain (R: everything of the routed
path before the first grouped GEMM) and the routed experts (G: the rest), each piece's kernel durations
scaled so that its solo graph matches the measured solo replay (minus the node gaps the engine adds), their
demands scaled alike. A pair ``A|B`` is captured as the bench captures it (fork from main with an event pair,
the branch named first captured first; ``~`` = a branch that first sleeps the measured ``sleep`` time) and
replayed; its simulated time per weight set is compared with the measured one.

``graph_join_us``: an empty fork/join added to the routed chain (aux only waits and records), or one around a
tiny aux kernel, costs the latency of the cross-stream edge back into main (``RG+fj0 − RG``, ``RG+fj1 − RG``;
pooled median over the configurations with a short routed chain, where the replay medians are precise).

The sharing forms are fitted on the pairs of R and G with S (both orders, both staggers); the ``S|RG`` /
``RG|S`` pairs (the layer's own overlap) are held out of every fit and only predicted: no parameter is fitted
to a layer-level gain.
"""

from __future__ import annotations

import gzip
import itertools
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from calibration.fit_kernels import residual_stats
from simulator.cost import CostModel
from simulator.engine import simulate
from simulator.inflight import InflightSharing
from simulator.interference import ResidencySharing
from simulator.ir import HostCosts, Launch, Program
from simulator.profile import Profile
from simulator.sharing import FluidSharing
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.layout import ExpertView
from simulator.workloads.presets import get_preset
from simulator.workloads.torch_ops import LayerEmitter

FIT_PAIRS = ("S|R", "R|S", "S|G", "G|S", "S~|RG", "S|~RG")
HELD_OUT_PAIRS = ("S|RG", "RG|S")
REPLAYS = 3


@dataclass(frozen=True)
class Pieces:
    """One configuration's pieces as costed launches (durations scaled to the measured solo graphs)."""

    preset: str
    tokens: int
    launches: dict[str, tuple[Launch, ...]]  # "S", "R", "G"
    measured_us: dict[str, float]
    sleep_us: float


def emitted_pieces(preset: str, tokens: int, profile: Profile) -> dict[str, tuple[Launch, ...]]:
    """The workload emitter's S, R and G launches of one configuration (unscaled)."""
    dims = get_preset(preset)
    b = ProgramBuilder(host=profile.host_costs("eager"), cost=CostModel(profile))
    ops = LayerEmitter(b, dims, tokens, "p")
    x = ops.buf("x")
    ops.shared(x, dims.shared_total)
    n_shared = len(b.build().ops)
    ids, weights = ops.gate(x)
    ops.experts(x, ids, weights, ExpertView.whole_layer(dims, tokens, fused=False))
    ops = [op for op in b.build().ops if isinstance(op, Launch)]
    shared, routed = tuple(ops[:n_shared]), ops[n_shared:]
    first_grouped = next(i for i, op in enumerate(routed) if op.family == "grouped_gemm")
    return {"S": shared, "R": tuple(routed[:first_grouped]), "G": tuple(routed[first_grouped:])}


def scaled(launches: Sequence[Launch], solo_us: float, node_gap_us: float) -> tuple[Launch, ...]:
    """Durations scaled so the chain's graph time (kernels + node gaps) is ``solo_us``; bandwidth and tensor
    demands scaled inversely (the same bytes and flops in another time)."""
    total = sum(op.dur_us for op in launches)
    busy = max(solo_us - node_gap_us * len(launches), 0.05 * solo_us)
    k = busy / total if total > 0 else 1.0
    return tuple(op.model_copy(update={"dur_us": op.dur_us * k, "bw": min(1.0, op.bw / k),
                                       "tc": min(1.0, op.tc / k)}) for op in launches)


def pieces_of(record: dict[str, Any], profile: Profile) -> Pieces:
    raw = emitted_pieces(record["preset"], int(record["tokens"]), profile)
    med = record["median_us"]
    gap = profile.host.node_gap_us.value
    return Pieces(record["preset"], int(record["tokens"]),
                  {k: scaled(v, med[k], gap) for k, v in raw.items()}, med, med.get("sleep", 0.0))


def pair_program(p: Pieces, pair: str, host: HostCosts) -> Program:
    """``pair`` (e.g. ``S|RG``, ``R|S``, ``S~|RG``) as a graph of one set, replayed ``REPLAYS`` times."""
    left, right = pair.split("|")
    aux_first = left.startswith("S")
    shared, other = (left, right) if aux_first else (right, left)
    b = ProgramBuilder(host=host)
    b.stream("aux")

    def branch(code: str, stream: str) -> list[Launch]:
        name = code.strip("~")
        out = [k.model_copy(update={"stream": stream}) for piece in (("R", "G") if name == "RG" else (name,))
               for k in p.launches[piece]]
        if "~" in code:
            out.insert(0, Launch(kernel="sleep", stream=stream, dur_us=p.sleep_us, sm=0.0, bw=0.0, tc=0.0,
                                 family="delay"))
        return out

    with b.capture("pair"):
        b.record("ready", "main")

        def aux_side() -> None:
            b.wait("ready", "aux")
            for k in branch(shared, "aux"):
                b.launch(k, "aux")
            b.record("done", "aux")
        if aux_first:
            aux_side()
        for k in branch(other, "main"):
            b.launch(k, "main")
        if not aux_first:
            aux_side()
        b.wait("done", "main")
    for _ in range(REPLAYS):
        b.replay("pair")
    return b.build()


def simulated_us(program: Program, sharing: Any) -> float:
    """Steady time per replay (the spacing of the replays' last ends)."""
    res = simulate(program, sharing)
    ends: dict[int, float] = {}
    for k in res.kernels:
        ends[k.replay or 0] = max(ends.get(k.replay or 0, 0.0), k.end_us)
    order = [ends[r] for r in sorted(ends)]
    return (order[-1] - order[0]) / (len(order) - 1)


SHORT_CHAIN_US = 300.0  # fork/join cost read only where the routed chain is short: its median's noise scales with it


def graph_join_us(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The fork/join cost inside a replayed graph: over the configurations whose routed chain (RG) is at most
    ``SHORT_CHAIN_US`` long, the median of ``RG+fj0 − RG`` (empty aux branch) and ``RG+fj1 − RG`` (one tiny
    aux kernel) pooled; with the spread of each."""
    short = [r["median_us"] for r in records if r["median_us"]["RG"] <= SHORT_CHAIN_US] or \
        [r["median_us"] for r in records]
    empty = [m["RG+fj0"] - m["RG"] for m in short]
    tiny = [m["RG+fj1"] - m["RG"] for m in short]
    return {"median_us": statistics.median(empty + tiny), "empty_median_us": statistics.median(empty),
            "tiny_median_us": statistics.median(tiny), "p10_us": float(np.percentile(empty + tiny, 10)),
            "p90_us": float(np.percentile(empty + tiny, 90)), "n": len(short)}


Simulated = list[tuple[Pieces, str, float]]  # (configuration, pair, simulated µs per set)


def simulated_pairs(pieces: Sequence[Pieces], pairs: Sequence[str], sharing: Any, host: HostCosts) -> Simulated:
    """Every measured (configuration, pair) of ``pairs`` simulated once under ``sharing``."""
    return [(p, pair, simulated_us(pair_program(p, pair, host), sharing))
            for p in pieces for pair in pairs if pair in p.measured_us]


def pair_errors(sims: Simulated) -> np.ndarray:
    """Relative error of the simulated pair time against the measured, per (configuration, pair)."""
    return np.array([sim / p.measured_us[pair] - 1.0 for p, pair, sim in sims])


def overlap_errors(sims: Simulated) -> np.ndarray:
    """Predicted minus measured overlap gain of each pair (1 − pair / (sum of its solo pieces)), in points of
    the sum: the quantity the multi-stream decision turns on."""
    return np.array([(p.measured_us[pair] - sim) / sum(p.measured_us[c] for c in _codes(pair))
                     for p, pair, sim in sims])


def _codes(pair: str) -> list[str]:
    return [c.strip("~") for c in pair.split("|")] + (["sleep"] if "~" in pair else [])


def grid_fit(pieces: Sequence[Pieces], make: Callable[..., Any], grid: dict[str, Sequence[float]],
             host: HostCosts, pairs: Sequence[str] = FIT_PAIRS) -> tuple[dict[str, float], float]:
    """The grid point with the least mean squared log error of the pair times."""
    best: tuple[dict[str, float], float] | None = None
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        params = dict(zip(names, values, strict=True))
        err = float(np.mean(np.log1p(pair_errors(simulated_pairs(pieces, pairs, make(**params), host))) ** 2))
        if best is None or err < best[1]:
            best = (params, err)
    assert best is not None
    return best


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``graph_corun.json.gz``."""
    return json.loads(gzip.decompress(Path(path).read_bytes()))


FORMS: dict[str, tuple[Callable[..., Any], dict[str, Sequence[float]]]] = {
    "residency": (ResidencySharing, {"floor": (0.02, 0.05, 0.2), "bw_capacity": (0.7, 0.85, 1.0, 1.1),
                                     "contention": (0.0, 0.5), "small_contention": (0.0, 1.0, 4.0)}),
    "inflight": (InflightSharing, {"sat_bw": (0.85, 0.95, 1.05), "inflight_full": (1.0, 2.0, 4.0),
                                   "latency_share": (0.0, 0.3, 0.7), "floor": (0.02, 0.05, 0.2)}),
}
FORM_UNITS: dict[str, dict[str, str]] = {"fluid": {}, "inflight": {
    "sat_bw": "saturated HBM throughput as a fraction of the measured copy ceiling",
    "inflight_full": "bytes a slot-filling streaming kernel keeps in flight over the bandwidth-delay product it "
                     "needs (dimensionless: in-flight bytes / (saturated bandwidth × unloaded latency))",
    "latency_share": "fraction of a latency-bound kernel's solo time spent in DRAM round trips",
    "floor": "share of its SM slots a later kernel obtains behind one that holds them all",
    "tc_capacity": "tensor rate offered to overlapping kernels, as a fraction of the measured bf16 ceiling",
}, "residency": {
    "floor": "share of its SM slots a later kernel obtains behind one that holds them all",
    "bw_capacity": "HBM throughput offered while streaming kernels overlap, fraction of the ceiling (a curve knob)",
    "tc_capacity": "tensor rate offered to overlapping kernels, fraction of the ceiling",
    "contention": "slowdown per unit of the others' bandwidth demand (a curve knob)",
    "small_contention": "the same for latency-bound kernels (a curve knob)",
}}


def compare_forms(pieces: Sequence[Pieces], host: HostCosts,
                  base: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """Fit every form on the R/G pairs; score each on the held-out S|RG / RG|S pairs (pair time and overlap
    gain); the form with the least median |overlap error| on the held-out pairs is chosen. ``base``: per form,
    values of the parameters its grid leaves out (else the form's defaults)."""
    report: dict[str, Any] = {}
    candidates = {"fluid": (FluidSharing(), {})}
    for form, (make, grid) in FORMS.items():
        fixed = (base or {}).get(form, {})
        fixed = {k: v for k, v in fixed.items() if k not in grid}
        params, _ = grid_fit(pieces, partial(make, **fixed), grid, host)
        params = fixed | params
        candidates[form] = (make(**params), params)
    for form, (model, params) in candidates.items():
        held = simulated_pairs(pieces, HELD_OUT_PAIRS, model, host)
        report[form] = {"params": params,
                        "fit_pair_time_error": residual_stats(pair_errors(simulated_pairs(pieces, FIT_PAIRS, model,
                                                                                          host))),
                        "held_out_pair_time_error": residual_stats(pair_errors(held)),
                        "held_out_overlap_error_points": residual_stats(100 * overlap_errors(held))}
    chosen = min(candidates, key=lambda f: report[f]["held_out_overlap_error_points"]["median_abs"])
    return {"chosen": chosen, "params": candidates[chosen][1], "comparison": report}
