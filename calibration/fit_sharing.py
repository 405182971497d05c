"""Fit how concurrent kernels share the device, for three forms (fluid max-min, slowdown regression, SM
residency + fluid bandwidth), and pick the one that validates best.

Each co-run pair becomes a two-stream program: gated pairs (no recorded start order) start together, as the
microbenchmark's gate makes them; staggered pairs (``first`` and ``offset_us`` recorded) start in that order,
the later stream behind a zero-demand delay launch of the measured offset, and each side's span is taken
from its own start, as measured. Its kernels carry the cost model's demands with durations scaled so each
side's solo span matches the measured one. A form's parameters are grid-searched to minimise the squared log
error of each side's span in the co-run plus (when given) of the calibration split's multi_stream layer gains;
forms are compared on pairs held out of a co-run-only fit (alternate pairs) and on those layer gains.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.fit_kernels import residual_stats, shape_share
from calibration.microbench.accounting import cost as spec_cost
from simulator.cost import KernelSpec, kernel_cost
from simulator.engine import simulate
from simulator.interference import ResidencySharing, SlowdownSharing
from simulator.ir import HostCosts, Launch, Program, StreamSpec
from simulator.profile import Profile
from simulator.sharing import FluidSharing

GRIDS: dict[str, dict[str, tuple[float, ...]]] = {
    "fluid": {"sm_capacity": (1.0, 1.25, 1.5, 2.0), "bw_capacity": (0.85, 0.95, 1.0, 1.1),
              "overlap_penalty": (0.0, 0.05, 0.1, 0.2, 0.3)},
    "slowdown": {"sm": (0.0, 0.1, 0.25, 0.5, 1.0), "bw": (0.0, 0.25, 0.5, 0.75, 1.0, 1.5),
                 "tc": (0.0, 0.25, 0.5, 1.0)},
    "residency": {"floor": (0.005, 0.02, 0.05), "bw_capacity": (0.6, 0.7, 0.8, 0.9, 1.0, 1.1),
                  "tc_capacity": (1.2,), "contention": (0.0, 0.5, 1.0), "small_contention": (0.0, 1.0, 2.0, 4.0)},
}


def make_model(form: str, params: dict[str, float]) -> Any:
    return {"fluid": FluidSharing, "slowdown": SlowdownSharing, "residency": ResidencySharing}[form](**params)


@dataclass(frozen=True)
class Pair:
    """A measured co-run: each side's kernels (solo-scaled) and the measured spans."""

    a: tuple[Launch, ...]
    b: tuple[Launch, ...]
    a_in_us: float
    b_in_us: float
    together_us: float
    label: str
    kind: str = ""
    first: str | None = None  # "a" | "b" when the start order was recorded (staggered pairs), else None
    offset_us: float = 0.0  # measured gap between the two starts

    def program(self, b_first: bool = False) -> Program:
        """Both sides launched at once (``b_first``: b's kernels reach the device first), or, with a recorded
        order, the later side behind a zero-demand delay of ``offset_us``."""
        if self.first is None:
            ops = self.b + self.a if b_first else self.a + self.b
        else:
            later = self.b if self.first == "a" else self.a
            early = self.a if self.first == "a" else self.b
            delay = Launch(kernel="delay", stream=later[0].stream, dur_us=max(self.offset_us, 1e-6), sm=0.0,
                           bw=0.0, tc=0.0, family="delay")
            ops = (*early, delay, *later)
        return Program(streams={"s1": StreamSpec(), "s2": StreamSpec()}, host=HostCosts(), ops=ops)


def _side(side: dict[str, Any], stream: str, profile: Profile) -> tuple[Launch, ...]:
    """The side's kernels with cost-model demands, durations scaled to the measured solo span."""
    shape = side["shape"]
    subs = shape["ops"] if shape["op"] == "chain" else [{"family": side["family"], **shape}]
    launches = []
    for sub in subs:
        nbytes, flops = spec_cost(sub)
        if "family" not in sub:
            sub = {**sub, "family": side["family"]}
        fam = profile.family(sub["family"])
        sm, rows = shape_share(sub, fam, profile.hardware.sm_count)
        c = kernel_cost(KernelSpec(sub.get("tag") or sub["op"], sub["family"], flops=flops, bytes=nbytes, sm=sm,
                                   rows=rows), profile)
        launches.append((sub, nbytes, c))
    total = sum(c.dur_us for *_, c in launches) or 1.0
    scale = side["solo_us"] / total
    out = []
    for sub, nbytes, c in launches:
        dur = c.dur_us * scale
        bw = min(1.0, nbytes / max(dur, 1e-9) / profile.hbm_bytes_per_us)
        tc = min(1.0, c.tc / scale) if scale > 0 else c.tc
        out.append(Launch(kernel=str(sub.get("tag") or sub["op"]), stream=stream, dur_us=dur, sm=c.sm, bw=bw,
                          tc=tc, family=sub["family"]))
    return tuple(out)


def pairs_from_corun(records: Sequence[dict[str, Any]], profile: Profile) -> list[Pair]:
    out = []
    for r in records:
        if not r.get("a_us_in_corun") or not r.get("b_us_in_corun"):
            continue
        label = f"{r['kind']}: {r['a']['shape'].get('tag')} x {r['b']['shape'].get('tag')}"
        first = r.get("first")
        out.append(Pair(_side(r["a"], "s1", profile), _side(r["b"], "s2", profile), r["a_us_in_corun"],
                        r["b_us_in_corun"], r["together_us"], label, str(r.get("kind", "")),
                        first if first in ("a", "b") else None, max(0.0, float(r.get("offset_us") or 0.0))))
    return out


def _spans(pair: Pair, model: Any, b_first: bool) -> tuple[float, float, float]:
    """(a span, b span, together): each side from its own first kernel's start (gated pairs: both start at
    0) to its last end; together from the first start to the last end."""
    res = simulate(pair.program(b_first), model)
    real = [k for k in res.kernels if k.name != "delay"]
    a0 = min(k.start_us for k in real if k.stream == "s1")
    b0 = min(k.start_us for k in real if k.stream == "s2")
    a1 = max(k.end_us for k in real if k.stream == "s1")
    b1 = max(k.end_us for k in real if k.stream == "s2")
    return a1 - a0, b1 - b0, max(a1, b1) - min(a0, b0)


def predict(pair: Pair, model: Any) -> tuple[float, float, float]:
    """(a span, b span, together) of the pair under a sharing model. Staggered pairs: simulated in their
    recorded order and offset. Gated pairs (order not recorded, both wait on one event): for a model that
    uses start order, both orders are simulated and the one closer to the measured spans is taken (the side
    that waited is the one that started second)."""
    if pair.first is not None:
        return _spans(pair, model, False)
    first = _spans(pair, model, False)
    second = _spans(pair, model, True)
    if first == second:
        return first

    def miss(s: tuple[float, float, float]) -> float:
        return (s[0] / pair.a_in_us - 1.0) ** 2 + (s[1] / pair.b_in_us - 1.0) ** 2
    return min(first, second, key=miss)


def errors(pairs: Sequence[Pair], model: Any) -> np.ndarray:
    """Relative errors of the two side spans of every pair (flattened)."""
    out = []
    for p in pairs:
        a, b, _ = predict(p, model)
        out += [a / p.a_in_us - 1.0, b / p.b_in_us - 1.0]
    return np.array(out)


def together_errors(pairs: Sequence[Pair], model: Any) -> np.ndarray:
    return np.array([predict(p, model)[2] / p.together_us - 1.0 for p in pairs])


LayerErrors = Callable[[Any], np.ndarray]


def grid_fit(pairs: Sequence[Pair], form: str, layer: LayerErrors | None = None,
             progress: Callable[[], None] | None = None) -> tuple[dict[str, float], float]:
    """Parameters of ``form`` with the least mean squared log error over the side spans of ``pairs`` plus,
    when given, over the relative errors ``layer(model)`` returns (the calibration split's multi_stream
    gains), each term divided by its value under unfitted fluid sharing so that neither dominates by scale;
    log: a small kernel that waits out a long one is off by a factor, not by thousands of per cent."""
    grid = GRIDS[form]
    names = list(grid)
    best: tuple[dict[str, float], float] | None = None
    base = FluidSharing()
    corun_norm = max(float(np.mean(np.log1p(errors(pairs, base)) ** 2)), 1e-12)
    layer_norm = max(float(np.mean(np.log1p(layer(base)) ** 2)), 1e-12) if layer is not None else 1.0
    for values in itertools.product(*(grid[n] for n in names)):
        params = dict(zip(names, values, strict=True))
        model = make_model(form, params)
        err = float(np.mean(np.log1p(errors(pairs, model)) ** 2)) / corun_norm
        if layer is not None:
            err += float(np.mean(np.log1p(layer(model)) ** 2)) / layer_norm
        if best is None or err < best[1] - 1e-12:
            best = (params, err)
        if progress:
            progress()
    assert best is not None
    return best


def fit_sharing(pairs: Sequence[Pair], layer: LayerErrors | None = None) -> dict[str, Any]:
    """Fit every form; score each on co-run pairs held out of a co-run-only fit (fit on even pairs, test on
    odd and vice versa) and, with ``layer``, on the calibration split's multi_stream gains; keep the form
    with the least sum of the two median |errors|, refitted on all pairs (+ the layer gains). Returns the
    profile's ``interference`` section plus the comparison."""
    if len(pairs) < 2:
        raise ValueError("the sharing fit needs at least two co-run pairs")
    halves = (pairs[0::2], pairs[1::2])
    report: dict[str, Any] = {}
    for form in GRIDS:
        held = []
        for train, test in (halves, halves[::-1]):
            params, _ = grid_fit(train, form)
            held.append(errors(test, make_model(form, params)))
        params, _ = grid_fit(pairs, form, layer)
        model = make_model(form, params)
        report[form] = {"params": params, "held_out_side_error": residual_stats(np.concatenate(held)),
                        "in_sample_side_error": residual_stats(errors(pairs, model)),
                        "in_sample_together_error": residual_stats(together_errors(pairs, model))}
        if layer is not None:
            report[form]["calibration_layer_gain_error"] = residual_stats(layer(model))
    default = FluidSharing()
    report["fluid_unfitted"] = {"in_sample_side_error": residual_stats(errors(pairs, default))}
    if layer is not None:
        report["fluid_unfitted"]["calibration_layer_gain_error"] = residual_stats(layer(default))

    def score(form: str) -> float:
        entry = report[form]
        return entry["held_out_side_error"]["median_abs"] + (
            entry["calibration_layer_gain_error"]["median_abs"] if layer is not None else 0.0)

    chosen = min(GRIDS, key=score)

    def words(form: str) -> str:
        entry = report[form]
        text = f"{form}: co-run {entry['held_out_side_error']['median_abs']:.1%}"
        if layer is not None:
            text += f", layer gains {entry['calibration_layer_gain_error']['median_abs']:.1%}"
        return text

    why = (f"{chosen} kept: least median |error| on held-out co-run side spans"
           f"{' + calibration-split multi_stream layer gains' if layer is not None else ''} "
           f"({'; '.join(words(f) for f in GRIDS)}; {len(pairs)} pairs, alternate halves)")
    return {"form": chosen, "params": report[chosen]["params"], "why": why, "comparison": report}
