"""The once-per-replay cost of a graph that forks across streams, from ``kernels_real.replay_length_probe`` runs.

The probe times graphs of N layer calls for several N and fits, per strategy, µs per replay = intercept + N ×
per layer. A single-stream graph's intercept is its start (the replay's launch and first node). A multi-stream
graph's is larger by what its first fork costs: in the layer traces the first layer of every multi_stream
replay overlaps far less than the later ones. That excess, multi_stream's intercept minus sequential's at the
same point, is ``host.graph_first_fork_us``: the engine delays both branches of a replay's first fork by it.
No layer-level gain enters it: it is the intercept of a line over replay lengths, the slopes stay out.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import InputError
from simulator.workloads.presets import split_rank_name

FILE = "replay_lengths.json"


def replay_length_file(run: Path) -> Path:
    """The probe's JSON: ``run`` itself, or ``run/replay_lengths.json``; InputError where neither is."""
    path = run if run.is_file() else run / FILE
    if not path.is_file():
        raise InputError(f"{run}: no {FILE} (a kernels_real.replay_length_probe run)")
    return path


def load_replay_lengths(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The probe's records and its environment record."""
    doc = json.loads(replay_length_file(run).read_text())
    records = doc.get("records") if isinstance(doc, dict) else None
    if not records:
        raise InputError(f"{run}: no records in {FILE}")
    return records, doc.get("env") or {}


def point_pairs(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[dict[str, Any], dict[str, Any]]]:
    """Per point (preset, tokens) with both strategies, in order: its (sequential, multi_stream) records."""
    by_point: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in records:
        by_point.setdefault((str(r["preset"]), int(r["tokens"])), {})[str(r["strategy"])] = r
    return {point: (pair["sequential"], pair["multi_stream"]) for point, pair in sorted(by_point.items())
            if {"sequential", "multi_stream"} <= pair.keys()}


def first_fork_excess(records: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """Per point (preset, tokens) with both strategies: multi_stream's per-replay intercept minus sequential's."""
    return {point: float(ms["intercept_us"]) - float(seq["intercept_us"])
            for point, (seq, ms) in point_pairs(records).items()}


def first_fork_figure(records: list[dict[str, Any]], where: str, holdout_presets: Sequence[str] = ()) -> dict[str, Any]:
    """``host.graph_first_fork_us`` with its source: the median over the points of the intercept excess (a
    negative median, no excess measured, gives 0); the points of ``holdout_presets`` and their rank variants left
    out."""
    kept = [r for r in records if split_rank_name(str(r["preset"]))[0] not in holdout_presets]
    if holdout_presets:
        where = f"{where}, presets held out: {sorted(holdout_presets)}"
    excess = sorted(first_fork_excess(kept).values())
    if not excess:
        raise InputError(f"{where}: no point with both sequential and multi_stream replay lengths")
    median = statistics.median(excess)
    p10, p90 = np.percentile(excess, [10, 90])
    return {"value": max(0.0, median),
            "source": f"measured ({where}): per point, the intercept of µs per replay against layers per replay "
                      f"(graphs of several lengths) of multi_stream minus that of sequential; median over "
                      f"{len(excess)} points (p10 {p10:.2f}, p90 {p90:.2f} µs); no gain enters it"}
