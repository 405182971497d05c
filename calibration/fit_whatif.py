"""The trace what-if's choices scored as a multi_stream policy on the decode sets, for the profile's record.

A decode set is a folder of sequential eager traces (``eager_traces{suffix}/traces``) beside the layout means of
the same points (``layout_means{suffix}``: each point's gain measured as the mean over four memory layouts). Per
trace, the what-if a user runs (``moesim whatif trace TRACE --aux-region moe.shared_experts --launch graph``)
predicts the multi_stream gain; choosing multi_stream where it predicts more than the margin is scored by its
regret beside the trivial policies (:mod:`simulator.decisions`), pooled over the sets. Nothing is fitted here: the
profile is only run. ``moesim thresholds`` prints the verdict beside the shape path's (``fit.decisions``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from simulator.decisions import GainPoint, score, verdict
from simulator.errors import InputError
from simulator.kineto.replay import WhatIf, run_whatif
from simulator.profile import Profile
from simulator.validation import measured_gains

REGION = "moe.shared_experts"  # kernels_real's record_function range of the shared experts
_NAME = re.compile(r"(?P<preset>.+)_t(?P<tokens>\d+)_sequential_(?P<mode>eager|graph)\.json\.gz$")


def sequential_traces(run: Path, mode: str) -> dict[tuple[str, int], Path]:
    """(preset, tokens) → the sequential trace of ``run/traces`` in ``mode`` (eager or graph)."""
    found = {}
    for path in sorted((run / "traces").glob(f"*_sequential_{mode}.json.gz")):
        m = _NAME.match(path.name)
        if m:
            found[(m["preset"], int(m["tokens"]))] = path
    return found


def eager_traces(run: Path) -> dict[tuple[str, int], Path]:
    """(preset, tokens) → the sequential eager trace of ``run/traces``."""
    found = sequential_traces(run, "eager")
    if not found:
        raise InputError(f"{run}/traces: no *_sequential_eager.json.gz trace")
    return found


def eager_whatifs(run: Path, reference: Path, profile: str | Profile | None = None, sharing: str = "placement",
                  durations: dict[tuple[str, int], Path] | None = None
                  ) -> Iterator[tuple[tuple[str, int], float, WhatIf]]:
    """Per eager trace of ``run`` whose point ``reference`` measured (and, with ``durations``, that has a graph
    trace there): its point, the measured gain and the what-if (shared experts on aux, one graph replay)."""
    measured = measured_gains([reference])
    for key, trace in eager_traces(run).items():
        if key not in measured or (durations is not None and key not in durations):
            continue
        yield key, measured[key], run_whatif(trace, REGION, launch="graph", profile=profile, progress=False,
                                             sharing=sharing, durations_from=(durations or {}).get(key))


def predicted_gain(result: WhatIf) -> float:
    """The what-if's multi_stream gain over its baseline replay (a fraction)."""
    return 1 - (result.whatif_layer_us or 0.0) / result.baseline_layer_us


def decode_sets(folder: Path) -> list[tuple[Path, Path]]:
    """(eager traces, layout means) folder pairs under ``folder``, matched by suffix."""
    pairs = []
    for run in sorted(folder.glob("eager_traces*")):
        means = folder / ("layout_means" + run.name.removeprefix("eager_traces"))
        if (run / "traces").is_dir() and (means / "cases.json").is_file():
            pairs.append((run, means))
    return pairs


def whatif_decisions_report(profile: Profile, decode: list[tuple[Path, Path]], rel: Callable[[Path], str] = str,
                            margin: float = 0.005) -> dict[str, Any] | None:
    """The regret of the trace what-if's choices on the decode sets ``decode`` (:func:`decode_sets`; None when
    they hold no measured point); ``rel`` names a folder in the report."""
    sets, points = [], []
    for run, means in decode:
        found = [GainPoint(key[0], key[1], measured, predicted_gain(result))
                 for key, measured, result in eager_whatifs(run, means, profile)]
        sets.append({"traces": rel(run), "reference": rel(means), "points": len(found)})
        points += found
    if not points:
        return None
    scores = score(points, margin)
    return {"sets": sets, "margin": margin, "points": len(points), "region": REGION,
            "scores": [s.to_json_dict() for s in scores], "verdict": verdict(scores, "the trace what-if")}
