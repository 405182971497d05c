"""The routing a bench run timed: how many routed experts its weight sets' routers hit, read from
``kernels_real.routing_counts``'s ``routing.json.gz`` (the bench's routers redrawn and its inputs routed again).

A bench case times one layer call per weight set (graph mode; eager bursts cycle through them), and each set's
random router hits its own experts: DeepSeek-V3 at 16 tokens hits 69 to 86 of its 256 experts from one set to
the next. ``with_routing`` gives each case the mean number of experts its sets hit (``touched_experts``), which
``validation.predict_case`` simulates instead of the expectation the shape path uses. The redraw depends on the
device and torch version, so a routing file serves only runs whose ``env.json`` names its torch version; the
newest ``<gpu>/<date>/routing/routing.json.gz`` beside a run's date folder is the one taken.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.errors import InputError

ROUTING_FILE = Path("routing") / "routing.json.gz"

Routing = dict[tuple[str, int, int], int]  # (preset, weight set, tokens) → experts hit


def find_routing(cases_path: Path) -> Path | None:
    """The newest routing file of the GPU whose measurements hold ``cases_path`` (…/<gpu>/<date>/…/cases.json),
    if its torch version is the run's (``env.json`` beside ``cases.json``); None otherwise."""
    run_torch = _torch_version(cases_path.parent / "env.json")
    for folder in cases_path.parents:
        found = sorted(folder.glob(f"*/{ROUTING_FILE.as_posix()}"))
        if found:
            newest = found[-1]
            same = run_torch is not None and _torch_version(newest.parent / "env.json") == run_torch
            return newest if same else None
        if folder.name == "measurements":  # searched up to calibration/measurements: not beyond
            break
    return None


def _torch_version(env_path: Path) -> str | None:
    try:
        return json.loads(env_path.read_text()).get("torch")
    except (FileNotFoundError, json.JSONDecodeError, AttributeError):
        return None


def load_routing(path: Path) -> Routing:
    """Experts hit per (preset, weight set, tokens) of a ``routing.json.gz`` (one-line errors)."""
    try:
        with gzip.open(path, "rt") as f:
            records = json.load(f)["records"]
        return {(str(r["preset"]), int(r["set"]), int(r["tokens"])): sum(1 for c in r["counts"] if c)
                for r in records}
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(f"{path}: not a routing_counts output ({type(err).__name__}: {err})") from None


def with_routing(cases: Sequence[dict[str, Any]], routing: Routing) -> list[dict[str, Any]]:
    """The cases, each whose weight sets ``routing`` holds all of given ``touched_experts`` (the mean over its
    sets of the experts hit); the others unchanged."""
    out = []
    for case in cases:
        sets = int(case.get("weight_sets") or 0)
        hits = [routing.get((str(case["preset"]), k, int(case["tokens"]))) for k in range(sets)]
        if sets and all(h is not None for h in hits):
            case = {**case, "touched_experts": sum(hits) / sets}
        out.append(case)
    return out
