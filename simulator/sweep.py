"""Cartesian sweeps of a scenario over ``--set`` values, run serially or on any ``concurrent.futures``
executor (local processes, or a Dask cluster's ``Client.get_executor()``).

Cases are sent in contiguous chunks, so a worker's memo of block simulations (``simulator.evaluate``)
serves its neighbouring cases; every case is computed from its own document alone, so the results are the
same whichever executor runs them, and they come back in case order.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from tqdm import tqdm

from simulator.calibrated_range import range_warnings
from simulator.errors import InputError
from simulator.evaluate import evaluate
from simulator.scenario import parse_scenario, parse_value, with_value


@dataclass(frozen=True)
class Axis:
    path: str
    values: tuple[Any, ...]


Group = Axis | tuple[Axis, ...]  # one axis, or axes zipped (their values paired by position)
_NAMED = re.compile(r"\s*[A-Za-z_][\w.]*\s*=")


def _split(raw: str) -> list[str]:
    """Split at commas outside brackets (``[1,2],[3]`` is two items)."""
    items, depth, current = [], 0, ""
    for ch in raw:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    return items


def parse_set(text: str) -> Axis:
    """``load.concurrency=1,2,4`` → Axis; commas inside brackets do not split (``a=[1,2],[3]``)."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip() or not raw.strip():
        raise InputError(f"--set {text!r}: expected FIELD.PATH=V1,V2,...")
    items = _split(raw)
    if any(not item.strip() for item in items):
        raise InputError(f"--set {text!r}: empty value")
    return Axis(path.strip(), tuple(parse_value(item.strip()) for item in items))


def parse_zip(tokens: Sequence[str]) -> tuple[Axis, ...]:
    """``--zip a=1,2,b=3,4`` (or ``a=1,2 b=3,4``): axes whose values are paired by position, not crossed."""
    text = ",".join(tokens)
    specs: list[str] = []
    for item in _split(text):
        if _NAMED.match(item) or not specs:
            specs.append(item)
        else:
            specs[-1] += "," + item
    axes = tuple(parse_set(spec) for spec in specs)
    if len(axes) < 2:
        raise InputError(f"--zip {text!r}: give two or more fields to pair, e.g. --zip parallelism.tp=4,8,"
                         "parallelism.ep=4,8")
    lengths = {len(a.values) for a in axes}
    if len(lengths) > 1:
        raise InputError(f"--zip {text!r}: the fields have " + ", ".join(f"{len(a.values)} ({a.path})" for a in axes)
                         + " values; zipped fields need the same number")
    return axes


def axes_of(groups: Sequence[Group]) -> list[Axis]:
    return [axis for g in groups for axis in (g if isinstance(g, tuple) else (g,))]


def check_distinct(axes: Sequence[Axis]) -> None:
    """Refuse a field given twice (its values would be silently lost) or inside another given field."""
    for i, a in enumerate(axes):
        for b in axes[:i]:
            if a.path == b.path:
                raise InputError(f"{a.path} is given twice; give all its values once, e.g. --set "
                                 f"{a.path}=V1,V2,...")
            inner, outer = sorted((a.path, b.path), key=len, reverse=True)
            if inner.startswith(outer + "."):
                raise InputError(f"{inner} and {outer} are both given; {outer} would replace or lose {inner}")


def expand_cases(document: dict[str, Any], groups: Sequence[Group]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(params, document) for every combination of the groups' values, the last group varying fastest; the
    axes of a zipped group take their values together."""
    check_distinct(axes_of(groups))
    rows = [[tuple(zip(g, combo, strict=True)) for combo in zip(*(a.values for a in g), strict=True)]
            if isinstance(g, tuple) else [((g, v),) for v in g.values] for g in groups]
    cases = []
    for combo in itertools.product(*rows):
        doc, params = document, {}
        for axis, value in (pair for row in combo for pair in row):
            doc = with_value(doc, axis.path, value)
            params[axis.path] = value
        cases.append((params, doc))
    return cases


def case_label(params: dict[str, Any], source: str) -> str:
    return f"{source} ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else source


def evaluate_case(params: dict[str, Any], document: dict[str, Any], source: str) -> dict[str, Any]:
    """One case as ``{"params", "results", "profile", "link", "inputs", "warnings"}`` (picklable, so any
    executor can run it); ``warnings``: where the case leaves its profile's calibrated range."""
    scenario = parse_scenario(document, case_label(params, source))
    evaluation = evaluate(scenario, source)
    out = evaluation.to_json_dict()
    return {"params": params, "results": out["results"], "profile": out["profile"], "link": out["link"],
            "inputs": out["inputs"],
            "warnings": list(range_warnings(evaluation.case, tuple(scenario.strategies.compare)))}


def evaluate_chunk(chunk: list[tuple[dict[str, Any], dict[str, Any]]], source: str) -> list[dict[str, Any]]:
    return [evaluate_case(params, doc, source) for params, doc in chunk]


Cases = list[tuple[dict[str, Any], dict[str, Any]]]


def split_valid(cases: Cases, source: str) -> tuple[Cases, list[dict[str, Any]]]:
    """The cases whose documents are valid, and ``{"params", "error"}`` for each that is not."""
    valid, invalid = [], []
    for params, doc in cases:
        try:
            parse_scenario(doc, case_label(params, source))
        except InputError as err:
            invalid.append({"params": params, "error": str(err)})
        else:
            valid.append((params, doc))
    return valid, invalid


def run_cases(cases: list[tuple[dict[str, Any], dict[str, Any]]], source: str, executor: Executor | None = None,
              progress: bool = True, chunks_per_worker: int = 4, workers: int = 1) -> list[dict[str, Any]]:
    """Evaluate the cases (serially without an executor), with a progress bar on stderr."""
    bar = tqdm(total=len(cases), desc="moesim sweep", unit="case", disable=None if progress else True,
               leave=False)
    try:
        if executor is None:
            out = []
            for params, doc in cases:
                out.append(evaluate_case(params, doc, source))
                bar.update(1)
            return out
        size = max(1, math.ceil(len(cases) / max(1, workers * chunks_per_worker)))
        chunks = [cases[i:i + size] for i in range(0, len(cases), size)]
        futures: list[Future] = [executor.submit(evaluate_chunk, chunk, source) for chunk in chunks]
        for future, chunk in zip(futures, chunks, strict=True):
            size_of_chunk = len(chunk)
            future.add_done_callback(partial(_advance, bar, size_of_chunk))
        return [case for future in futures for case in future.result()]
    finally:
        bar.close()


def _advance(bar: tqdm, n: int, _future: Future) -> None:
    bar.update(n)


@contextmanager
def open_executor(jobs: int, address: str | None) -> Iterator[tuple[Executor | None, int]]:
    """(executor, workers): none for one local job, a process pool for ``jobs`` > 1, or a Dask cluster's
    executor for ``dask://HOST:PORT`` (needs the ``[dask]`` extra)."""
    if address is not None:
        if not address.startswith("dask://"):
            raise InputError(f"--executor {address!r}: expected dask://HOST:PORT")
        try:
            from distributed import Client
        except ImportError:
            raise InputError("--executor dask://... needs the dask extra: pip install 'moesim[dask]'") from None
        try:
            client = Client(address.replace("dask://", "tcp://", 1), timeout=10)
        except OSError as err:
            raise InputError(f"cannot reach the Dask scheduler at {address}: {err}") from None
        with client:
            workers = max(1, sum(client.nthreads().values()))
            yield client.get_executor(), workers
        return
    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    if jobs == 1:
        yield None, 1
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield pool, jobs


def sweep(document: dict[str, Any], groups: Sequence[Group], source: str, jobs: int = 1,
          address: str | None = None, progress: bool = True, skip_invalid: bool = False) -> dict[str, Any]:
    """The ``moesim sweep --json`` document. An invalid case fails the sweep before any work starts, unless
    ``skip_invalid``: then the valid ones run and the others are listed under ``skipped``."""
    cases, invalid = split_valid(expand_cases(document, groups), source)
    if invalid and not skip_invalid:
        more = f" ({len(invalid)} of {len(cases) + len(invalid)} cases are invalid; --skip-invalid runs the others)"
        raise InputError(invalid[0]["error"] + more)
    if not cases:
        raise InputError(f"{source}: no valid case to run; first: {invalid[0]['error']}")
    with open_executor(jobs, address) as (executor, workers):
        results = run_cases(cases, source, executor=executor, progress=progress, workers=workers)
    out: dict[str, Any] = {"scenario": source, "axes": {a.path: list(a.values) for a in axes_of(groups)},
                           "zip": [[a.path for a in g] for g in groups if isinstance(g, tuple)], "cases": results}
    if skip_invalid:
        out["skipped"] = invalid
    return out
