"""Sweeps: --set parsing, cartesian expansion, serial == parallel, executor errors."""

from __future__ import annotations

import importlib.util

import pytest

from simulator.errors import InputError
from simulator.sweep import Axis, expand_cases, open_executor, parse_set, sweep

BASE = {"model": {"preset": "DeepSeek-V2-Lite"}, "platform": {"profile": "h200-datasheet"},
        "parallelism": {"tp": 2, "dp": 1, "ep": 1}, "load": {"concurrency": 4}}


def test_parse_set_values_are_yaml_and_brackets_do_not_split() -> None:
    assert parse_set("load.concurrency=1,2,4") == Axis("load.concurrency", (1, 2, 4))
    assert parse_set("strategies.dbo=[false],[false,true]").values == ([False], [False, True])
    assert parse_set("platform.profile=mi300x").values == ("mi300x",)
    for bad in ("load.concurrency", "=1", "a=1,,2"):
        with pytest.raises(InputError):
            parse_set(bad)


def test_expand_cases_is_cartesian_last_axis_fastest() -> None:
    cases = expand_cases(BASE, [Axis("load.concurrency", (1, 2)), Axis("parallelism.tp", (1, 2, 4))])
    assert [tuple(p.values()) for p, _ in cases] == [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4)]
    assert cases[5][1]["parallelism"]["tp"] == 4 and cases[5][1]["load"]["concurrency"] == 2
    assert BASE["load"]["concurrency"] == 4


def test_parallel_sweep_equals_serial() -> None:
    axes = [Axis("load.concurrency", (1, 3, 8, 20)), Axis("parallelism.tp", (1, 2))]
    serial = sweep(BASE, axes, "base", jobs=1, progress=False)
    parallel = sweep(BASE, axes, "base", jobs=2, progress=False)
    assert parallel == serial
    assert len(serial["cases"]) == 8
    assert serial["cases"][2]["params"] == {"load.concurrency": 3, "parallelism.tp": 1}


def test_an_invalid_case_fails_before_any_work_and_names_it() -> None:
    with pytest.raises(InputError, match=r"load.concurrency=0\).*greater than or equal to 1"):
        sweep(BASE, [Axis("load.concurrency", (2, 0))], "base", progress=False)


def test_executor_errors_are_one_line() -> None:
    with pytest.raises(InputError, match="expected dask://HOST:PORT"), open_executor(1, "tcp://x:1"):
        pass
    with pytest.raises(InputError, match="--jobs must be >= 1"), open_executor(0, None):
        pass


@pytest.mark.skipif(importlib.util.find_spec("distributed") is not None, reason="distributed is installed")
def test_dask_executor_without_the_extra() -> None:
    with pytest.raises(InputError, match=r"moesim\[dask\]"), open_executor(1, "dask://127.0.0.1:8786"):
        pass
