"""``benchmarks/dispatch_table.py`` on a hand-made probe record; a missing run is one line and exit code 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.helpers_benchmarks import load_benchmark


def _graph(us: float, sms: int = 0, most: int = 0, block: float = 0.0) -> dict:
    return {"us": us, "sms": sms, "max_per_sm": most, "block_us": block, "span_us": 1.0, "late": 0}


def test_table_by_hand(tmp_path: Path) -> None:
    dt = load_benchmark("dispatch_table")
    graphs = {"S": _graph(10.0), "Rc": _graph(5.0), "S|Rc": _graph(20.0), "S|~Rc": _graph(14.0),
              "R": _graph(4.0, 112, 1, 3.0), "S|R": _graph(12.0, 36, 4, 6.0), "S|~R": _graph(13.0, 112, 1, 3.5)}
    record = {"shared": "a", "router": "b", "graphs": graphs}
    (tmp_path / "dispatch_probe.json.gz").write_bytes(gzip.compress(json.dumps({"records": [record]}).encode()))
    text = dt.markdown(dt.load(tmp_path))
    assert "| a | b | 10.0 | 5.0 | 15.0 | 20.0 | 14.0 | – | 112 / 36 / 112 / – | 4 | 3.0 / 6.0 / 3.5 / – |" in text
    assert "captured first" not in text  # a run without the routed-first graphs (call 48)
    assert "slower than the two in sequence: 1 of 1" in text and "more SMs after the spin than without: 1 of 1" in text


def test_routed_first_columns_where_measured(tmp_path: Path) -> None:
    dt = load_benchmark("dispatch_table")
    graphs = {"S": _graph(10.0), "Rc": _graph(5.0), "S|Rc": _graph(20.0), "S|~Rc": _graph(14.0),
              "Rc|S": _graph(22.0), "R": _graph(4.0, 112, 1, 3.0), "S|R": _graph(12.0, 36, 4, 6.0),
              "S|~R": _graph(13.0, 112, 1, 3.5), "R|S": _graph(12.5, 40, 3, 5.5)}
    text = dt.markdown([{"shared": "a", "router": "b", "graphs": graphs}])
    assert "| 20.0 | 14.0 | 22.0 | 112 / 36 / 112 / 40 | 4 | 3.0 / 6.0 / 3.5 / 5.5 |" in text
    assert "than in S\\|R in 1 of 1 cases" in text


def test_missing_run_is_one_line(tmp_path: Path, capsys) -> None:
    assert load_benchmark("dispatch_table").main([str(tmp_path)]) == 2
    assert "dispatch_probe writes it" in capsys.readouterr().err
