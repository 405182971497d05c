"""The reader's fast path (event runs cut at ``},{`` and decoded in C) against hand-known contents, its fallback to
the streaming parser, the metadata it keeps, and one readable line for binary or corrupt files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from simulator.cli import main as cli_main
from simulator.kineto import reader
from simulator.kineto.reader import read_trace
from tests.data.kineto.synth import Synth, moe_layer


def _trace_doc() -> dict:
    s = Synth()
    moe_layer(s)
    moe_layer(s)
    doc = s.document()
    # an event whose args hold a list of objects: a '},{' inside one event, where a cut must not stay
    doc["traceEvents"].insert(3, {"ph": "X", "cat": "cpu_op", "name": "aten::odd", "pid": 1000, "tid": 1001,
                                  "ts": 1000.5, "dur": 0.1, "args": {"objs": [{"a": 1}, {"b": 2}]}})
    doc["moesim_layers_per_trace"] = 2
    return doc


def _summary(path: Path) -> tuple:
    t = read_trace(path, progress=False)
    return ([(g.name, g.ts, g.dur, g.corr) for g in t.gpu_ops], [r.name for r in t.ranges], len(t.cpu_ops),
            len(t.host_calls), len(t.flows), sorted(t.devices), t.metadata.get("moesim_layers_per_trace"))


@pytest.mark.parametrize("block", [64, 1000, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_cut_runs_read_every_event_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int,
                                        indent: int | None) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc(), indent=indent))
    monkeypatch.setattr(reader, "BLOCK", block)
    kernels, ranges, cpu_ops, calls, flows, devices, layers = _summary(path)
    # two hand-built layers: 6 kernels each, 3 ranges each, one launch call per kernel (no flows kept: every
    # kernel names its correlation id)
    assert [k[0] for k in kernels] == ["gate_gemm", "shared_up", "shared_down", "routed_up", "routed_down",
                                       "combine_add"] * 2
    assert ranges == ["moe.gate", "moe.shared_experts", "moe.routed_experts"] * 2
    assert (cpu_ops, calls, flows, devices, layers) == (1, 12, 0, [0], 2)


def test_fallback_and_stdlib_decoder_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc()))
    fast = _summary(path)
    monkeypatch.setattr(reader, "_loads", json.loads)  # orjson absent
    assert _summary(path) == fast

    def refuse(*_: object) -> None:
        raise reader._NotSplittable

    monkeypatch.setattr(reader, "_parse_split", refuse)  # the streaming parser (and its metadata pass)
    assert _summary(path) == fast


def test_bare_list_and_metadata_after_the_events(tmp_path: Path) -> None:
    doc = _trace_doc()
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc["traceEvents"]))
    assert len(read_trace(bare, progress=False).gpu_ops) == 12
    late = tmp_path / "late.json"
    events = doc.pop("traceEvents")
    late.write_text(json.dumps({"traceEvents": events, **doc}))
    trace = read_trace(late, progress=False)
    assert trace.metadata["moesim_layers_per_trace"] == 2 and trace.devices[0].num_sms == 132


@pytest.mark.parametrize("content", [os.urandom(64) + b"\x00\x05", b'{"traceEvents": [{"ph": "X",\x05\x06 ]}'])
def test_binary_or_corrupt_trace_is_one_readable_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert cli_main.main(["whatif", "trace", str(path), "--aux-region", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "b'" not in err and err.isprintable()
    assert "binary or corrupt" in err
