"""Collectives as waits and several ranks aligned at them, on synthetic rank traces whose kernel names are those
NCCL and DeepEP print; expected answers derived by hand. No multi-GPU trace was measured for these."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main as cli_main
from simulator.kineto.comm import is_comm
from simulator.kineto.ranks import run_ranks
from simulator.kineto.replay import run_whatif
from tests.data.kineto.synth import Synth

PROFILE = str(Path(__file__).parent / "data" / "kineto" / "test-profile.json")
DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)"
COMBINE = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)"


def _rank(path: Path, gate_us: float, dispatch_us: float) -> Path:
    """vLLM's DP + EP order, shared experts on main: gate, shared experts (2 × 30), DeepEP dispatch (traced
    ``dispatch_us``: mostly waiting for the other rank), routed experts (2 × 20), combine (5), add (5)."""
    s = Synth()
    with s.range("moe.gate"):
        s.launch("gate", gate_us)
    with s.range("moe.shared_experts"):
        s.launch("shared_up", 30.0)
        s.launch("shared_down", 30.0)
    s.launch(DISPATCH, dispatch_us)
    with s.range("moe.routed_experts"):
        s.launch("routed_up", 20.0)
        s.launch("routed_down", 20.0)
    s.launch(COMBINE, 5.0)
    s.launch("add", 5.0)
    path.write_text(s.dumps())
    return path


def _pair(tmp_path: Path) -> list[str]:
    # Traced (calls 5 µs apart from 1000; link latency 5 µs, no shapes: transfer 5 µs): rank 0's dispatch
    # 1076..1111 waits for rank 1's (gate 40 µs: dispatch 1106..1111); both then run routed 1112..1153, combine
    # 1154..1159, add 1160..1165: spans 162, collectives ending together (clock offset 0).
    return [str(_rank(tmp_path / "r0.json", 10.0, 35.0)), str(_rank(tmp_path / "r1.json", 40.0, 5.0))]


@pytest.mark.parametrize("name, comm", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", True),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", True), (DISPATCH, True), (COMBINE, True),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", True),
    ("combine_add", False), ("nvjet_sm90_tst_64x16_64x16_4x1_v_bz_TNT", False),
])
def test_comm_kernel_names(name: str, comm: bool) -> None:
    assert is_comm(name) is comm


def test_one_rank_replays_its_collective_waits(tmp_path: Path) -> None:
    """As traced (sim clock = trace - 1002, gap 1): the dispatch is ready at 74 but its peers' bound (traced end
    109) holds it: 104..109; the replay matches the traced 162 µs. Moving the shared experts to aux changes
    nothing on this rank alone: the traced end says its peer arrived at 104 anyway."""
    path = _rank(tmp_path / "r0.json", 10.0, 35.0)
    report = run_whatif(path, "moe.shared_experts", join_after="moe.routed_experts", profile=PROFILE,
                        progress=False)
    k = {r.name: r for r in report.baseline.kernels}
    assert (k[DISPATCH].start_us, k[DISPATCH].end_us) == pytest.approx((104.0, 109.0))
    assert report.baseline_us == pytest.approx(162.0) and report.whatif_us == pytest.approx(162.0)
    assert any("2 collective kernels replayed as waits" in note for note in report.notes)


def test_two_ranks_gain_when_all_move_the_shared_experts(tmp_path: Path) -> None:
    """Graph replays (10 µs host, node gap 0.5, transfer 5). Baseline: rank 0 reaches the dispatch at 82, rank 1
    (gate 40) at 112, so it ends at 117 on both; routed 117.5..158; combine 158.5..163.5; add 164..169:
    spans 158.5. What-if (shared experts on aux, joined after the routed experts): dispatch reached at 21 and
    51 -> ends 56; routed 56.5..97; combine waits rank 1's shared experts (aux, 81.5..111.5) -> 112..117;
    add 117.5..122.5: spans 112, step gain 1 - 112 / 158.5."""
    out = run_ranks(_pair(tmp_path), "moe.shared_experts", join_after="moe.routed_experts", launch="graph",
                    profile=PROFILE, progress=False)
    assert [r["baseline_us"] for r in out["ranks"]] == pytest.approx([158.5, 158.5])
    assert [r["whatif_us"] for r in out["ranks"]] == pytest.approx([112.0, 112.0])
    assert [r["clock_offset_us"] for r in out["ranks"]] == pytest.approx([0.0, 0.0])
    assert out["step_baseline_us"] == pytest.approx(158.5) and out["step_whatif_us"] == pytest.approx(112.0)
    assert out["step_gain"] == pytest.approx(1 - 112.0 / 158.5, abs=1e-5) and out["collectives"] == 2
    assert out["sharing_form"] == "placement"


def test_ranks_on_other_clocks_and_mismatched_collectives(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    paths = _pair(tmp_path)
    shifted = json.loads(Path(paths[1]).read_text())
    for ev in shifted["traceEvents"]:
        ev["ts"] += 5000.0  # rank 1's clock 5 ms ahead
    Path(paths[1]).write_text(json.dumps(shifted))
    out = run_ranks(paths, "moe.shared_experts", join_after="moe.routed_experts", launch="graph", profile=PROFILE,
                    progress=False)
    assert out["ranks"][1]["clock_offset_us"] == pytest.approx(-5000.0)
    assert out["step_whatif_us"] == pytest.approx(112.0)
    lonely = Synth()
    lonely.launch("gate", 10.0)
    (tmp_path / "none.json").write_text(lonely.dumps())
    assert cli_main.main(["whatif", "trace", paths[0], str(tmp_path / "none.json"), "--profile", PROFILE]) == 2
    assert "same number of collective kernels" in capsys.readouterr().err
    assert cli_main.main(["whatif", "trace", *paths, "--profile", PROFILE, "--measured-us", "10"]) == 2
    assert "--measured-us: one trace at a time" in capsys.readouterr().err
    assert cli_main.main(["whatif", "trace", *paths, "--aux-region", "moe.shared_experts", "--join-after",
                          "moe.routed_experts", "--launch", "graph", "--profile", PROFILE]) == 0
    assert "step (slowest rank)" in capsys.readouterr().out
