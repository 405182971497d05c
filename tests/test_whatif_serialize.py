"""``whatif trace --serialize-aux`` (the reverse question: a multi-stream trace's work on one stream) and the
duration overlay of a multi-stream graph trace whose streams ran in another order (by name and occurrence)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main as cli_main
from simulator.errors import InputError
from simulator.kineto.replay import run_whatif
from tests.data.kineto.synth import Synth

PROFILE = str(Path(__file__).parent / "data" / "kineto" / "test-profile.json")
DURS = {"gate": 10.0, "shared_up": 30.0, "shared_down": 30.0, "routed_up": 40.0, "routed_down": 40.0,
        "combine": 5.0}


def _two_streams(path: Path, scale: float = 1.0, routed_first: bool = False) -> Path:
    """The MoE layer as vLLM overlaps it: gate on 7, fork, shared experts on 9, routed experts on 7, join,
    combine (``routed_first``: the routed experts launched before the shared ones)."""
    s = Synth()
    s.launch("gate", DURS["gate"] * scale)
    fork = s.record(7)
    s.wait(9, 7, fork)
    order = [("routed_up", 7), ("routed_down", 7), ("shared_up", 9), ("shared_down", 9)]
    for name, stream in order if routed_first else order[2:] + order[:2]:
        s.launch(name, DURS[name] * scale, stream=stream)
    join = s.record(9)
    s.wait(7, 9, join)
    s.launch("combine", DURS["combine"] * scale)
    path.write_text(s.dumps())
    return path


def test_serialized_graph_replay_matches_hand_timeline(tmp_path: Path) -> None:
    # Graph replay (10 µs host, node gap 0.5): overlapped, gate 10.5..20.5, shared 21..51, 51.5..81.5 beside
    # routed 21..61, 61.5..101.5, combine 102..107: span 96.5. Serialized: the six kernels back to back,
    # 155 µs + 5 gaps of 0.5 = 157.5.
    out = run_whatif(_two_streams(tmp_path / "ms.json"), None, serialize_aux=True, launch="graph", profile=PROFILE,
                     progress=False).to_json_dict()
    assert out["baseline_us"] == pytest.approx(96.5)
    assert out["whatif_us"] == pytest.approx(157.5)
    assert (out["serialize_aux"], out["moved_kernels"], out["region_instances"]) == (True, 2, 1)


def test_serialize_refuses_one_stream_and_a_selector(moe_trace: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match="on one stream"):
        run_whatif(moe_trace, None, serialize_aux=True, profile=PROFILE, progress=False)
    path = str(_two_streams(tmp_path / "ms.json"))
    assert cli_main.main(["whatif", "trace", path, "--serialize-aux", "--aux-region", "x", "--profile",
                          PROFILE]) == 2
    assert "--serialize-aux asks the reverse question" in capsys.readouterr().err
    assert cli_main.main(["whatif", "trace", path, "--serialize-aux", "--launch", "graph", "--profile", PROFILE,
                          "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["whatif_us"] == pytest.approx(157.5)


def test_graph_durations_of_reordered_streams_map_by_name(tmp_path: Path) -> None:
    """The durations trace launched the routed experts first (its streams ran in another order) and ran every
    kernel at half its duration: each kernel takes its namesake's, and the serialized replay is
    155 / 2 + 5 gaps of 0.5 = 80."""
    eager = _two_streams(tmp_path / "eager.json")
    graph = _two_streams(tmp_path / "graph.json", scale=0.5, routed_first=True)
    report = run_whatif(eager, None, serialize_aux=True, launch="graph", durations_from=graph, profile=PROFILE,
                        progress=False)
    assert {k.name: k.end_us - k.start_us for k in report.whatif.kernels} == \
        pytest.approx({name: d / 2 for name, d in DURS.items()})
    assert report.whatif_us == pytest.approx(80.0)
    assert "by name and occurrence" in report.durations
