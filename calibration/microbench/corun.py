"""Co-run pairs: two kernels (or kernel chains) started together on two non-blocking streams."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibration.microbench.ops import build
from calibration.microbench.progress import progress
from calibration.microbench.records import corun_record
from calibration.microbench.timing import STAGGER_CYCLES, capture, gated_spans, replay_times, staggered_spans

HOW = ("gated: a sleep kernel on a third stream, then one start event that both non-blocking streams wait on, "
       "so both sides start together after the host has enqueued everything; spans are event-timed from that "
       "common start to each side's end (a_us_in_corun, b_us_in_corun; together_us = the later). solo_us and "
       "sequential_us (a then b on one stream) are measured the same way, interleaved rep by rep; buffers "
       "rotate per rep. graph_* = event-timed replays of a captured fork/join graph (both sides) and a one-"
       "stream graph (a then b), buffers of rotation 0, graph launch cost included in both. Staggered pairs "
       "(first = 'a' or 'b'): the same gate, but the later side first sleeps ~2 µs on its own stream; every "
       "side records a begin event just before its kernels, so its span (solo and in the co-run) runs from its "
       "own begin to its end, offset_us is the measured gap between the two begins (median), a_start_us / "
       "b_start_us each side's begin after the common start, together_us = last end - first begin; both "
       "orders are measured interleaved rep by rep against one set of solo and sequential spans; no graphs")
Mark = tuple[float, float]


def _pick(calls: list[Any], r: int) -> Any:
    return calls[r % len(calls)]


def measure(torch: Any, pair: dict[str, Any], dev: Any, l2: int, reps: int) -> dict[str, Any]:
    """One corun record for ``pair``."""
    cache: dict[Any, Any] = {}
    a_calls = build(torch, pair["a"], dev, l2, cache)
    b_calls = build(torch, pair["b"], dev, l2, cache)
    for c in a_calls + b_calls:
        c()
    torch.cuda.synchronize()
    gate, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    keys = ("a", "b", "seq", "a_in", "b_in", "together")
    samples: dict[str, list[float]] = {k: [] for k in keys}
    lost = 0
    for r in range(reps + 2):
        a, b = _pick(a_calls, r), _pick(b_calls, r)
        (ta,), ok1 = gated_spans(torch, gate, [(s1, [a])])
        (tb,), ok2 = gated_spans(torch, gate, [(s2, [b])])
        (ts,), ok3 = gated_spans(torch, gate, [(s1, [a, b])])
        (tai, tbi), ok4 = gated_spans(torch, gate, [(s1, [a]), (s2, [b])])
        if r < 2:
            continue  # warm-up
        lost += not (ok1 and ok2 and ok3 and ok4)
        for k, v in zip(keys, (ta, tb, ts, tai, tbi, max(tai, tbi)), strict=True):
            samples[k].append(v)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    g_seq = capture(torch, [a_calls[0], b_calls[0]])
    g_tog = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g_tog):
        cs = torch.cuda.current_stream()
        for s, c in ((s1, a_calls[0]), (s2, b_calls[0])):
            s.wait_stream(cs)
            with torch.cuda.stream(s):
                c()
        cs.wait_stream(s1)
        cs.wait_stream(s2)
    replay_times(torch, [g_seq, g_tog], 2)
    t_seq, t_tog = replay_times(torch, [g_seq, g_tog], reps)
    extra = {"graph_sequential_us": float(np.median(t_seq)), "graph_together_us": float(np.median(t_tog)),
             "gate_too_short": lost, "samples_us": {k: [round(x, 3) for x in v] for k, v in samples.items()}}
    del g_seq, g_tog
    cache.clear()
    return corun_record(pair["kind"], pair["a"], pair["b"], med, reps, extra)


def corun_sample(a: Mark, b: Mark) -> dict[str, float]:
    """One rep of a staggered co-run from each side's (begin, end) in µs after the common start."""
    return {"a_in": a[1] - a[0], "b_in": b[1] - b[0], "together": max(a[1], b[1]) - min(a[0], b[0]),
            "offset": abs(b[0] - a[0]), "a_start": a[0], "b_start": b[0]}


def staggered_records(pair: dict[str, Any], solo: dict[str, list[float]], orders: dict[str, list[dict[str, float]]],
                      reps: int, lost: int) -> list[dict[str, Any]]:
    """The two records (first = "a", first = "b") of a staggered pair from per-rep solo spans (keys ``a``,
    ``b``, ``seq``) and per-rep ``corun_sample`` dicts of each order."""
    out = []
    for first, rows in orders.items():
        samples = {**solo, **{k: [r[k] for r in rows] for k in rows[0]}}
        med = {k: float(np.median(v)) for k, v in samples.items()}
        extra = {"a_start_us": med["a_start"], "b_start_us": med["b_start"], "gate_too_short": lost,
                 "samples_us": {k: [round(x, 3) for x in v] for k, v in samples.items()}}
        out.append(corun_record(pair["kind"], pair["a"], pair["b"], med, reps, extra, first=first,
                                offset_us=med["offset"]))
    return out


def measure_staggered(torch: Any, pair: dict[str, Any], dev: Any, l2: int, reps: int) -> list[dict[str, Any]]:
    """Two corun records of ``pair``: a launched first (b ~2 µs later on the device), and b first."""
    cache: dict[Any, Any] = {}
    a_calls = build(torch, pair["a"], dev, l2, cache)
    b_calls = build(torch, pair["b"], dev, l2, cache)
    for c in a_calls + b_calls:
        c()
    torch.cuda.synchronize()
    gate, s1, s2 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    solo: dict[str, list[float]] = {"a": [], "b": [], "seq": []}
    orders: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    lost = 0
    for r in range(reps + 2):
        a, b = _pick(a_calls, r), _pick(b_calls, r)
        spans, oks = [], []
        for lanes in ([(s1, [a], 0)], [(s2, [b], 0)], [(s1, [a, b], 0)]):
            (mark,), ok = staggered_spans(torch, gate, lanes)
            spans.append(mark[1] - mark[0])
            oks.append(ok)
        (xa, xb), ok_a = staggered_spans(torch, gate, [(s1, [a], 0), (s2, [b], STAGGER_CYCLES)])
        (yb, ya), ok_b = staggered_spans(torch, gate, [(s2, [b], 0), (s1, [a], STAGGER_CYCLES)])
        if r < 2:
            continue  # warm-up
        lost += not all((*oks, ok_a, ok_b))
        for k, v in zip(("a", "b", "seq"), spans, strict=True):
            solo[k].append(v)
        orders["a"].append(corun_sample(xa, xb))
        orders["b"].append(corun_sample(ya, yb))
    cache.clear()
    return staggered_records(pair, solo, orders, reps, lost)


def run(torch: Any, pairs: list[dict[str, Any]], dev: Any, l2: int, budget: Any, reps: int,
        notes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    bar = progress(total=len(pairs), desc="corun")
    for i, pair in enumerate(pairs):
        if budget.expired():
            budget.skip("corun", len(pairs) - i)
            break
        try:
            if pair.get("staggered"):
                out += measure_staggered(torch, pair, dev, l2, reps)
            else:
                out.append(measure(torch, pair, dev, l2, reps))
        except (RuntimeError, NotImplementedError, TypeError) as err:
            notes.append(f"corun {pair['a'].get('tag')} x {pair['b'].get('tag')} failed: "
                         f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
            torch.cuda.synchronize()
        torch.cuda.empty_cache()
        bar.update(1)
    bar.close()
    return out
