"""calibration.compact_traces: flows dropped only where every GPU op has its correlation id; reader sees the same."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from calibration.compact_traces import compact_file, main
from simulator.kineto.reader import read_trace


def _trace(correlated: bool) -> dict:
    kernel_args = {"correlation": 7, "stream": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}
    if not correlated:
        kernel_args.pop("correlation")
    return {"traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 10.0, "dur": 3.0,
         "args": {"correlation": 7}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 2, "ts": 10.0},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20.0, "dur": 5.0, "args": kernel_args},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 20.0, "bp": "e"},
    ]}


def _write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(doc, indent=2).encode()))
    return path


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_flows_go_where_every_gpu_op_is_correlated(tmp_path: Path) -> None:
    path = _write(tmp_path / "run" / "traces" / "a.json.gz", _trace(correlated=True))
    before = read_trace(path)
    size, after_size = compact_file(path)
    assert after_size < size
    assert [e["cat"] for e in _events(path)] == ["cuda_runtime", "kernel"]
    after = read_trace(path)
    assert [(o.name, o.ts, o.dur, o.corr) for o in after.gpu_ops] == [(o.name, o.ts, o.dur, o.corr)
                                                                      for o in before.gpu_ops]


def test_flows_stay_where_a_gpu_op_needs_them(tmp_path: Path) -> None:
    path = _write(tmp_path / "run" / "traces" / "b.json.gz", _trace(correlated=False))
    original = path.read_bytes()
    assert compact_file(path)[0] == compact_file(path)[1]
    assert path.read_bytes() == original


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "run" / "traces").mkdir(parents=True)
    (tmp_path / "run" / "traces" / "c.json.gz").write_bytes(b"not gzip")
    assert main([str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "c.json.gz" in err
