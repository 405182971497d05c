"""Eager host costs per torch op of the layer, from profiler-free host timings (``kernels_real.bench
--host-costs``), in place of per-family microbench figures times one scale fitted to layer times.

A case's record holds the host-only time of its layer call (plain calls launched onto an idle GPU, ``host_idle_us``,
as a host-bound eager layer launches; in runs before those, plain calls behind a busy GPU, ``host_only_us``: see
:func:`host_time`) and, for one clocked call, every torch function call with its time and the host time before it
(``kernels_real.host_costs``). The builder's launches (``simulator.workloads.torch_ops``) are matched to those calls
in order, by the torch functions that can implement each (``simulator.workloads.torch_calls.CALLS``); a launch costs
its call's time plus all host time since the previous matched call returned (views, metadata reads,
``record_function`` ranges, the layer's Python), the layer's tail after the last one going to the last, all × host
time / clocked (the clock's own cost taken out in proportion). Per builder op name the median over the calibration
split's sequential and fused_shared cases is the figure; per kernel family the median of its ops' figures (for ops
the table lacks), over all ops the generic launch cost; the stream and event calls cost what multi_stream's host
time exceeds sequential's, shared in proportion to their microbench figures. Nothing here is fitted to a layer's
device time.

Those figures are timed behind a busy device. A host-bound eager call launches onto a drained stream and
its event-timed call outlasts its host-only time: :func:`fit_idle_launch` reads that excess per launch from the
host-bound calibration cases (the engine's ``idle_launch_us``, paid by an eager launch onto an idle stream).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from simulator.ir import Program
from simulator.profile import Profile
from simulator.validation import predict_case
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset
from simulator.workloads.torch_calls import CALLS

STREAM_CALLS = ("record", "wait", "set_stream")  # the builder's host ops of the fork/join (no torch function)


def layer_program(case: dict[str, Any], profile: Profile) -> Program:
    """One eager layer call of ``case`` (preset, tokens, strategy) as the builder issues it."""
    return moe_layer_program(get_preset(str(case["preset"])), int(case["tokens"]), str(case["strategy"]), profile,
                             mode="eager")


def builder_ops(case: dict[str, Any], profile: Profile) -> list[tuple[str, str | None]]:
    """(op, kernel family) of :func:`layer_program`: launches by name, the stream and event calls by kind (family
    None)."""
    return [(op.kernel, op.family) if op.op == "launch" else (op.op, None) for op in layer_program(case, profile).ops]


def launch_costs(case: dict[str, Any], launches: Sequence[str]) -> list[float] | None:
    """Host µs of each of ``launches`` (builder op names, in order) in ``case``'s clocked call, on the host-only
    scale; None where the calls do not match (a launch with no call of its torch functions after the previous)."""
    calls = case.get("host_ops") or []
    costs: list[float] = []
    pending = 0.0
    k = 0
    for name in launches:
        allowed = CALLS.get(name)
        if allowed is None:
            return None
        while k < len(calls) and calls[k]["name"] not in allowed:
            pending += calls[k]["before_us"] + calls[k]["us"]
            k += 1
        if k == len(calls):
            return None
        costs.append(pending + calls[k]["before_us"] + calls[k]["us"])
        pending = 0.0
        k += 1
    if not costs:
        return None
    clocked = float(case["host_clocked_us"])
    costs[-1] += max(0.0, clocked - sum(costs))  # the tail after the last matched call
    scale = host_time(case) / clocked
    return [c * scale for c in costs]


def host_time(case: dict[str, Any]) -> float:
    """A case's measured host µs per plain layer call: launched onto an idle GPU where the run measured it
    (``host_idle_us``), else behind a busy GPU (``host_only_us``). Neither is exactly what a host-bound eager
    burst spends: on an H100 (2026-12-05, 1-4 tokens) the burst's steady call lay 7.6 % above the busy-GPU time
    and the idle-GPU time 7.3 % above the burst's (``calibration/measurements/h100/2026-12-05/README.md``)."""
    return float(case.get("host_idle_us", case["host_only_us"]))


def fit_host_costs(cases: Sequence[dict[str, Any]], profile: Profile, where: str) -> dict[str, Any]:
    """The host section's eager figures from the calibration split's eager cases that carry host timings:
    ``launch_by_op_us``, ``launch_by_family_us``, ``launch_us`` and the stream/event calls' costs, each a
    figure with its source; plus ``report`` (cases used, unmatched)."""
    per_op: dict[str, list[float]] = {}
    family_of: dict[str, str | None] = {}
    unmatched: list[str] = []
    host: dict[tuple[str, int, str], float] = {}
    idle = all("host_idle_us" in c for c in cases if c.get("mode") == "eager" and "host_only_us" in c)
    for case in cases:
        if case.get("mode") != "eager" or "host_only_us" not in case:
            continue
        host[(str(case["preset"]), int(case["tokens"]), str(case["strategy"]))] = host_time(case)
        if case["strategy"] == "multi_stream":
            continue
        ops = [(n, f) for n, f in builder_ops(case, profile) if f is not None]
        costs = launch_costs(case, [n for n, _ in ops])
        if costs is None:
            unmatched.append(f"{case['preset']} t{case['tokens']} {case['strategy']}")
            continue
        for (name, family), cost in zip(ops, costs, strict=True):
            per_op.setdefault(name, []).append(cost)
            family_of[name] = family
    if not per_op:
        raise ValueError(f"{where}: no eager case with host timings matched the builder's ops")
    by_op = {name: statistics.median(xs) for name, xs in per_op.items()}
    families: dict[str, list[float]] = {}
    for name, cost in by_op.items():
        families.setdefault(str(family_of[name]), []).append(cost)
    extra = [host[(p, t, "multi_stream")] - host[(p, t, "sequential")]
             for (p, t, s) in host if s == "multi_stream" and (p, t, "sequential") in host]
    stream_us = statistics.median(extra) if extra else None
    how = (f"measured ({where}): host µs per torch op of kernels_real's eager layer "
           f"{'launched onto an idle GPU' if idle else 'behind a busy GPU'}, "
           "profiler-free (kernels_real.bench --host-costs; calibration.fit_host)")
    out: dict[str, Any] = {
        "launch_by_op_us": {name: {"value": cost, "source": f"{how}: median of {len(per_op[name])} calls"}
                            for name, cost in sorted(by_op.items())},
        "launch_by_family_us": {fam: {"value": statistics.median(xs),
                                      "source": f"{how}: median of the family's {len(xs)} op figures"}
                                for fam, xs in sorted(families.items())},
        "launch_us": {"value": statistics.median(by_op.values()),
                      "source": f"{how}: median of all {len(by_op)} op figures"},
        "report": {"cases": sum(len(v) for v in per_op.values()), "ops": len(by_op), "unmatched": unmatched,
                   "multi_stream_pairs": len(extra)},
    }
    if stream_us is not None:
        micro = {key: getattr(profile.host, f"{key}_us").value for key in STREAM_CALLS}
        per_layer = 2 * sum(micro.values())  # two of each per layer call (fork and join)
        factor = max(stream_us, 0.0) / per_layer if per_layer > 0 else 0.0
        for key, value in micro.items():
            out[f"{key}_us"] = {"value": value * factor,
                                "source": f"measured ({where}): multi_stream's host time per layer call minus "
                                          f"sequential's (median {stream_us:.1f} µs over {len(extra)} calibration "
                                          f"points), shared over the fork/join's two {key} calls and the others "
                                          "in proportion to their microbench figures"}
    return out


HOST_BOUND = 1.25  # a case is host-bound where its host time is at least this many times its device time


def idle_launch_excess(cases: Sequence[dict[str, Any]], profile: Profile) -> list[tuple[dict[str, Any], float]]:
    """Per eager case with host timings and a timed steady call that is host-bound (host-only time at least
    ``HOST_BOUND`` × the device time the profile gives its graph): the case and its steady event-timed call minus
    its host-only time, per launch (µs)."""
    out = []
    for case in cases:
        if case.get("mode") != "eager" or "host_only_us" not in case or "steady_median_us" not in case:
            continue
        host = host_time(case)
        if host < HOST_BOUND * predict_case(profile, {**case, "mode": "graph", "layers_per_replay": 1}):
            continue
        launches = sum(1 for op in layer_program(case, profile).ops if op.op == "launch")
        out.append((case, (float(case["steady_median_us"]) - host) / launches))
    return out


def fit_idle_launch(cases: Sequence[dict[str, Any]], profile: Profile, where: str) -> dict[str, Any] | None:
    """``idle_launch_us``: the extra host µs of an eager launch onto a stream with nothing queued or running.
    The per-op figures are timed behind a busy device; a host-bound eager call launches onto a drained one, and
    its event-timed call (``steady_median_us``: the steady calls of its bursts) outlasts its host-only time: the
    median of :func:`idle_launch_excess` over the calibration cases given, with its spread and count. None where
    no case is host-bound with its steady call timed (runs before bursts were recorded)."""
    per_case = [excess for _, excess in idle_launch_excess(cases, profile)]
    if not per_case:
        return None
    return {"value": max(0.0, statistics.median(per_case)),
            "source": f"measured ({where}): per host-bound calibration case (host-only time ≥ {HOST_BOUND} × its "
                      "device time), its event-timed steady call minus its host-only time, per launch; median of "
                      f"{len(per_case)} cases (p10 {np.percentile(per_case, 10):.2f}, "
                      f"p90 {np.percentile(per_case, 90):.2f})"}
