"""A trace whose kernels hang under CUDA-graph replays: module selection says which trace or option to give;
``--aux-kernels`` picks ops by position in the repeating period of the op sequence."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.kineto.replay import list_modules, run_whatif
from simulator.kineto.select import layer_period
from tests.data.kineto.synth import DEV, PID, TID, Synth, moe_layer

PROFILE = str(Path(__file__).parent / "data" / "kineto" / "test-profile.json")


def _graph_trace(path: Path) -> Path:
    """One cudaGraphLaunch whose three kernels ran back to back (one correlation id)."""
    s = Synth()
    s.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": PID, "tid": TID,
                     "ts": 1000.0, "dur": 10.0, "args": {"correlation": 5}})
    for n, name in enumerate(("a", "b", "c")):
        s.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": DEV, "tid": 7, "ts": 1012.0 + 11 * n,
                         "dur": 10.0, "args": {"device": DEV, "stream": 7, "correlation": 5, "grid": [8, 1, 1],
                                               "block": [128, 1, 1]}})
    path.write_text(s.dumps())
    return path


def test_module_selection_on_a_graph_trace_names_the_eager_twin(tmp_path: Path) -> None:
    path = _graph_trace(tmp_path / "g.json")
    with pytest.raises(InputError, match=r"3 GPU ops launched by CUDA-graph replays .* --durations-from"):
        run_whatif(path, None, module="DeepseekV2MoE/DeepseekV2MLP", profile=PROFILE, progress=False)
    assert list_modules(path, PROFILE, progress=False)["graph_ops"] == 3


@pytest.mark.parametrize("names, period", [
    (list("abcabc"), 3), (list("abab"), 2), (list("aaaa"), 1), (list("abcab"), 5), (list("abcabd"), 6), ([], 0),
])
def test_layer_period(names: list[str], period: int) -> None:
    assert layer_period(names) == period


def test_aux_kernels_by_position_match_hand_timeline(tmp_path: Path) -> None:
    # Two layers as one graph replay (10 µs host, node gap 0.5): sequential 310 µs of kernels + 11 gaps = 315.5.
    # Shared experts (positions 1-2) on aux, main waiting before the period's last op (combine): layer 1
    # gate 10.5..20.5, shared 21..51, 51.5..81.5 beside routed 21..61, 61.5..101.5, combine 102..107; layer 2
    # gate 107.5..117.5, shared 118..148, 148.5..178.5 beside routed 118..158, 158.5..198.5, combine 199..204:
    # span 204 - 10.5 = 193.5.
    s = Synth()
    moe_layer(s)
    moe_layer(s)
    path = tmp_path / "two.json"
    path.write_text(s.dumps())
    out = run_whatif(path, None, aux_kernels="1-2", launch="graph", profile=PROFILE, progress=False).to_json_dict()
    assert out["baseline_us"] == pytest.approx(315.5) and out["whatif_us"] == pytest.approx(193.5)
    assert (out["region_instances"], out["moved_kernels"]) == (2, 4)
    # joined right after the shared experts (position 2): the routed experts wait for them, nothing overlaps
    serial = run_whatif(path, None, aux_kernels="1-2", join_after_kernel="2", launch="graph", profile=PROFILE,
                        progress=False)
    assert serial.whatif_us == pytest.approx(315.5)


@pytest.mark.parametrize("kw, message", [
    ({"aux_kernels": "9"}, "outside the period of 6 GPU ops"),
    ({"aux_kernels": "1-2,4"}, "needs --join-after-kernel"),
    ({"aux_kernels": "1-2", "join_after_kernel": "0"}, "at or after its run's end"),
    ({"aux_kernels": "2-1"}, "each run ascending"),
    ({"aux_kernels": "x"}, "positions like 3-5,9"),
    ({"join_after_kernel": "3"}, "needs --aux-kernels"),
])
def test_aux_kernels_bad_input(tmp_path: Path, kw: dict, message: str) -> None:
    s = Synth()
    moe_layer(s)
    moe_layer(s)
    path = tmp_path / "two.json"
    path.write_text(s.dumps())
    with pytest.raises(InputError, match=message):
        run_whatif(path, None, launch="graph", profile=PROFILE, progress=False, **kw)


def test_aux_kernels_without_a_period_asks_for_the_eager_twin(moe_trace: Path) -> None:
    with pytest.raises(InputError, match=r"no repeating period.*--durations-from"):
        run_whatif(moe_trace, None, aux_kernels="1-2", profile=PROFILE, progress=False)


def test_listing_names_the_period_only_when_it_repeats(tmp_path: Path, moe_trace: Path) -> None:
    s = Synth()
    moe_layer(s)
    moe_layer(s)
    path = tmp_path / "two.json"
    path.write_text(s.dumps())
    period = list_modules(path, PROFILE, progress=False)["period"]
    assert period == {"repeats": 2, "ops": ["gate_gemm", "shared_up", "shared_down", "routed_up", "routed_down",
                                            "combine_add"]}
    assert list_modules(moe_trace, PROFILE, progress=False)["period"] == {"repeats": 1, "ops": []}
