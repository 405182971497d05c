"""Sweeps: --set parsing, cartesian expansion, serial == parallel, executor errors."""

from __future__ import annotations

import importlib.util

import pytest

from simulator.errors import InputError
from simulator.sweep import Axis, expand_cases, open_executor, parse_set, parse_zip, sweep

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
    with pytest.raises(InputError, match=r"load.concurrency=0\).*expected a number ≥ 1.*--skip-invalid"):
        sweep(BASE, [Axis("load.concurrency", (2, 0))], "base", progress=False)


def test_skip_invalid_runs_the_valid_cases_and_lists_the_others() -> None:
    out = sweep(BASE, [Axis("load.concurrency", (2, 0, 4))], "base", progress=False, skip_invalid=True)
    assert [c["params"]["load.concurrency"] for c in out["cases"]] == [2, 4]
    assert [s["params"] for s in out["skipped"]] == [{"load.concurrency": 0}]
    assert "expected a number ≥ 1" in out["skipped"][0]["error"]
    with pytest.raises(InputError, match="no valid case"):
        sweep(BASE, [Axis("load.concurrency", (0, -1))], "base", progress=False, skip_invalid=True)


def test_a_field_given_twice_or_inside_another_is_refused() -> None:
    with pytest.raises(InputError, match=r"load\.concurrency is given twice"):
        expand_cases(BASE, [Axis("load.concurrency", (1, 2)), Axis("load.concurrency", (4,))])
    with pytest.raises(InputError, match=r"load\.concurrency and load are both given"):
        expand_cases(BASE, [Axis("load", ({"concurrency": 1},)), Axis("load.concurrency", (4,))])
    with pytest.raises(InputError, match="given twice"):
        expand_cases(BASE, [(Axis("parallelism.tp", (1, 2)), Axis("load.concurrency", (1, 2))),
                            Axis("load.concurrency", (4,))])


def test_zip_pairs_values_and_crosses_with_the_other_axes() -> None:
    zipped = parse_zip(["parallelism.tp=1,2,parallelism.ep=1,2"])
    assert zipped == parse_zip(["parallelism.tp=1,2", "parallelism.ep=1,2"])
    assert zipped == (Axis("parallelism.tp", (1, 2)), Axis("parallelism.ep", (1, 2)))
    cases = expand_cases(BASE, [Axis("load.concurrency", (1, 8)), zipped])
    assert [tuple(p.values()) for p, _ in cases] == [(1, 1, 1), (1, 2, 2), (8, 1, 1), (8, 2, 2)]
    assert parse_zip(["strategies.compare=[sequential],[multi_stream],load.concurrency=1,2"])[0].values == (
        ["sequential"], ["multi_stream"])
    for bad, message in ((["a=1,2"], "two or more"), (["a=1,2,b=3"], "same number")):
        with pytest.raises(InputError, match=message):
            parse_zip(bad)


def test_executor_errors_are_one_line() -> None:
    with pytest.raises(InputError, match="expected dask://HOST:PORT"), open_executor(1, "tcp://x:1"):
        pass
    with pytest.raises(InputError, match="--jobs must be >= 1"), open_executor(0, None):
        pass


@pytest.mark.skipif(importlib.util.find_spec("distributed") is not None, reason="distributed is installed")
def test_dask_executor_without_the_extra() -> None:
    with pytest.raises(InputError, match=r"moesim\[dask\]"), open_executor(1, "dask://127.0.0.1:8786"):
        pass
