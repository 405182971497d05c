"""Cartesian sweeps of a scenario over ``--set`` values, run serially or on any ``concurrent.futures``
executor (local processes, or a Dask cluster's ``Client.get_executor()``).

Cases are sent in contiguous chunks, so a worker's memo of block simulations (``simulator.evaluate``)
serves its neighbouring cases; every case is computed from its own document alone, so the results are the
same whichever executor runs them, and they come back in case order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from tqdm import tqdm

from simulator.errors import InputError
from simulator.evaluate import evaluate
from simulator.scenario import parse_scenario, parse_value, with_value


@dataclass(frozen=True)
class Axis:
    path: str
    values: tuple[Any, ...]


def parse_set(text: str) -> Axis:
    """``load.concurrency=1,2,4`` → Axis; commas inside brackets do not split (``a=[1,2],[3]``)."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip() or not raw.strip():
        raise InputError(f"--set {text!r}: expected FIELD.PATH=V1,V2,...")
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
    if any(not item.strip() for item in items):
        raise InputError(f"--set {text!r}: empty value")
    return Axis(path.strip(), tuple(parse_value(item.strip()) for item in items))


def expand_cases(document: dict[str, Any], axes: Sequence[Axis]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(params, document) for every combination of the axes' values, the last axis varying fastest."""
    cases = []
    for combo in itertools.product(*(axis.values for axis in axes)):
        doc, params = document, {}
        for axis, value in zip(axes, combo, strict=True):
            doc = with_value(doc, axis.path, value)
            params[axis.path] = value
        cases.append((params, doc))
    return cases


def evaluate_case(params: dict[str, Any], document: dict[str, Any], source: str) -> dict[str, Any]:
    """One case as ``{"params", "results"}`` (picklable, so any executor can run it)."""
    where = f"{source} ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else source
    evaluation = evaluate(parse_scenario(document, where), source)
    out = evaluation.to_json_dict()
    return {"params": params, "results": out["results"], "profile": out["profile"], "link": out["link"],
            "inputs": out["inputs"]}


def evaluate_chunk(chunk: list[tuple[dict[str, Any], dict[str, Any]]], source: str) -> list[dict[str, Any]]:
    return [evaluate_case(params, doc, source) for params, doc in chunk]


def validate_cases(cases: list[tuple[dict[str, Any], dict[str, Any]]], source: str) -> None:
    """Fail before any work starts if one case's document is invalid."""
    for params, doc in cases:
        where = f"{source} ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else source
        parse_scenario(doc, where)


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


def sweep(document: dict[str, Any], axes: Sequence[Axis], source: str, jobs: int = 1, address: str | None = None,
          progress: bool = True) -> dict[str, Any]:
    """The ``moesim sweep --json`` document."""
    cases = expand_cases(document, axes)
    validate_cases(cases, source)
    with open_executor(jobs, address) as (executor, workers):
        results = run_cases(cases, source, executor=executor, progress=progress, workers=workers)
    return {"scenario": source, "axes": {a.path: list(a.values) for a in axes}, "cases": results}
