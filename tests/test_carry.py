"""calibration.carry: measured quantities carried into a datasheet profile, each labelled, nothing else changed."""

import json
import shutil
from pathlib import Path

import pytest

from calibration.carry import carried, main
from simulator.errors import InputError
from simulator.profile import load_profile, parse_profile

PROFILES = Path(__file__).resolve().parent.parent / "simulator" / "profiles"


def _doc(name: str) -> dict:
    return json.loads((PROFILES / f"{name}.json").read_text())


def test_carried_takes_the_sharing_model_join_cost_and_gemm_residency_and_says_so():
    source = load_profile("h200")
    target = _doc("h200-datasheet")
    doc = carried(target, source)
    profile = parse_profile(doc)
    assert profile.interference.form == source.interference.form
    assert profile.interference.params == source.interference.params
    assert profile.describe() == "h200-datasheet (DATASHEET figures, sharing carried from h200, not calibrated)"
    assert profile.interference.source.startswith(f"NOT measured on {profile.hardware.gpu}")
    assert profile.host.graph_join_us.value == source.host.graph_join_us.value
    assert "carried from h200" in profile.host.graph_join_us.source
    for gap in ("node_gap_us", "kernel_gap_us"):  # device-side gaps; the host API costs stay the datasheet's
        assert getattr(profile.host, gap).value == getattr(source.host, gap).value
        assert getattr(profile.host, gap).source.startswith(f"NOT measured on {profile.hardware.gpu}")
    assert doc["host"]["launch_us"] == target["host"]["launch_us"]
    for fam in ("gemm", "grouped_gemm"):
        assert profile.kernel_families[fam].resident == source.kernel_families[fam].resident
        assert "carried from h200" in profile.kernel_families[fam].source
    assert profile.memory_latency is not None and profile.memory_latency.classes == source.memory_latency.classes
    assert profile.memory_latency.source.startswith(f"NOT measured on {profile.hardware.gpu}")
    assert profile.issue_warps is not None and source.issue_warps is not None
    assert profile.issue_warps.value == source.issue_warps.value
    assert profile.issue_warps.source.startswith(f"NOT measured on {profile.hardware.gpu}")
    assert source.issue_warps_by_kernel, "the calibrated profile measured a kernel class apart"
    assert {c: f.value for c, f in profile.issue_warps_by_kernel.items()} == \
        {c: f.value for c, f in source.issue_warps_by_kernel.items()}
    assert all(f.source.startswith(f"NOT measured on {profile.hardware.gpu}")
               for f in profile.issue_warps_by_kernel.values())
    untouched = {k for k in target if k not in ("host", "interference", "kernel_families", "memory_latency",
                                                 "issue_warps", "issue_warps_by_kernel")}
    assert all(doc[k] == target[k] for k in untouched)
    assert doc["ceilings"] == target["ceilings"]


def test_carrying_twice_says_it_once():
    source = load_profile("h200")
    once = carried(_doc("b200"), source)
    twice = carried(once, source)
    assert twice == once


def test_only_a_calibrated_profile_is_carried():
    with pytest.raises(InputError, match="not a calibrated profile"):
        carried(_doc("b200"), load_profile("mi300x"))


def test_cli_rewrites_the_named_file_and_refuses_bad_input(tmp_path, capsys):
    path = tmp_path / "b200.json"
    shutil.copy(PROFILES / "b200.json", path)
    assert main(["--to", str(path)]) == 0
    assert load_profile(path).interference.form == load_profile("h200").interference.form
    before = path.read_text()
    assert main(["--to", str(path), str(tmp_path / "missing.json")]) == 2
    assert path.read_text() == before  # nothing written when any input is bad
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_kernel_tables_carry_only_to_the_same_chip_with_rates_under_its_ceiling():
    source, datasheet = load_profile("h200"), load_profile("h200-datasheet")
    with pytest.raises(InputError, match="not the chip of"):
        carried(_doc("b200"), source, datasheet)
    doc = carried(_doc("h100"), source, datasheet)
    profile = parse_profile(doc)
    assert profile.kernel_tables.keys() == source.kernel_tables.keys()
    assert profile.kernel_tables_from is not None and profile.kernel_tables_from.gpu == source.hardware.gpu
    assert "kernel times measured on NVIDIA H200" in profile.describe()
    hbm, here = source.ceilings.hbm_GBps.value, profile.ceilings.hbm_GBps.value
    # the ceiling the H200's gemm family reaches, scaled by the datasheet figures (4800 -> 3350 GB/s)
    ceiling = source.kernel_families["gemm"].bw_eff * hbm * here / datasheet.ceilings.hbm_GBps.value
    for name, family in profile.kernel_families.items():
        rate_there = source.kernel_families[name].bw_eff * hbm
        assert family.bw_eff * here == pytest.approx(min(rate_there, ceiling))
        assert family.source.startswith(f"NOT measured on {profile.hardware.gpu}")
    gemm, grouped = profile.kernel_families["gemm"], profile.kernel_families["grouped_gemm"]
    assert gemm.bw_eff * here == pytest.approx(ceiling)  # the dense GEMMs follow the HBM
    assert grouped.bw_eff * here == pytest.approx(source.kernel_families["grouped_gemm"].bw_eff * hbm)  # fits under
    assert carried(doc, source, datasheet) == doc  # carrying twice changes nothing


def test_cli_refuses_kernel_tables_for_another_chip(tmp_path, capsys):
    path = tmp_path / "b200.json"
    shutil.copy(PROFILES / "b200.json", path)
    before = path.read_text()
    assert main(["--to", str(path), "--kernel-tables"]) == 2
    assert path.read_text() == before
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kernel times carry only between GPUs of one chip" in err[0]


def test_runs_of_the_target_gpu_score_the_carried_profile(tmp_path, capsys):
    h100 = Path(__file__).resolve().parent.parent / "calibration" / "measurements" / "h100" / "2026-12-05"
    h200_run = h100.parent.parent / "h200" / "2026-12-03" / "kernels_real9"
    path = tmp_path / "h100.json"
    shutil.copy(PROFILES / "h100.json", path)
    before = path.read_text()
    assert main(["--to", str(path), "--kernel-tables", "--score-runs", str(h200_run)]) == 2  # another GPU's run
    assert path.read_text() == before
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "measured on NVIDIA H200, not on NVIDIA H100" in err[0]
    assert main(["--to", str(path), "--kernel-tables", "--score-runs", str(h100 / "layer_traces_small")]) == 0
    decisions = load_profile(path).fit["decisions"]
    assert decisions["points"] == 80  # 20 presets and rank variants x 1/2/4/16 tokens, both strategies timed
    assert {s["policy"] for s in decisions["scores"]} >= {"model", "always"}
    assert "nothing is fitted" in decisions["note"]


def test_launches_recorded_on_the_target_gpu_are_its_own_never_carried(tmp_path, capsys):
    """Without --geometry the carried profile records no GEMM launch (the H200's are not the H100's); with a folder
    of the target's launch records it records those; a folder with none is refused with one line."""
    from tests.test_launch_geometry import SIMT, _probe_file

    path = tmp_path / "h100.json"
    shutil.copy(PROFILES / "h100.json", path)
    doc = carried(_doc("h100") | {"launch_geometry": None}, load_profile("h200"), None)
    assert doc.get("launch_geometry") is None
    _probe_file(tmp_path / "runs" / "geometry_probe", SIMT)
    assert main(["--to", str(path), "--geometry", str(tmp_path / "runs")]) == 0
    recorded = load_profile(path).launch_geometry
    assert recorded is not None and "mm_fp32 K=7168 N=256" in recorded.launches
    assert main(["--to", str(path), "--geometry", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --geometry: no geometry-probe run")


def _graph_corun(folder: Path, gpu: str) -> Path:
    """Three configurations: fork/join costs 2 and 4 µs (DeepSeek-V3), 1 and 3 µs (Qwen2), 50 µs (DeepSeek-V2-Lite,
    a preset the h200 profile holds out); all routed chains short."""
    import gzip

    folder.mkdir(parents=True)
    recs = [{"preset": p, "tokens": 1, "median_us": {"RG": rg, "RG+fj0": rg + e, "RG+fj1": rg + t}}
            for p, rg, e, t in (("deepseek_v3", 100.0, 2.0, 4.0), ("qwen2_57b_a14b", 200.0, 1.0, 3.0),
                                ("deepseek_v2_lite", 100.0, 50.0, 50.0))]
    (folder / "graph_corun.json.gz").write_bytes(gzip.compress(json.dumps(recs).encode()))
    (folder / "env.json").write_text(json.dumps({"device_name": gpu}))
    return folder


def test_fork_join_cost_measured_on_the_target_gpu_replaces_the_carried_one(tmp_path, capsys):
    """--graph-corun: the pooled median of the empty and one-kernel fork/join costs over the run's configurations,
    the source profile's held-out preset left out (median of 2, 4, 1, 3 = 2.5 µs), labelled measured; a run of
    another GPU is refused with one line and nothing written."""
    path = tmp_path / "h100.json"
    shutil.copy(PROFILES / "h100.json", path)
    gpu = load_profile(path).hardware.gpu
    assert main(["--to", str(path), "--graph-corun", str(_graph_corun(tmp_path / "h100run", gpu))]) == 0
    join = load_profile(path).host.graph_join_us
    assert join.value == pytest.approx(2.5)
    assert join.source.startswith("measured (") and "presets held out: ['deepseek_v2_lite']" in join.source
    before = path.read_text()
    assert main(["--to", str(path), "--graph-corun", str(_graph_corun(tmp_path / "h200run", "NVIDIA H200"))]) == 2
    assert path.read_text() == before
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"measured on NVIDIA H200, not on {gpu}" in err[0]
    assert main(["--to", str(path), "--graph-corun", str(tmp_path / "nothing")]) == 2
    assert "no graph_corun.json.gz there" in capsys.readouterr().err


def _replay_lengths(folder: Path, gpu: str) -> Path:
    """Two points: multi_stream's per-replay intercept exceeds sequential's by 5 and 7 µs."""
    folder.mkdir(parents=True)
    recs = [{"preset": "deepseek_v3@tp8", "tokens": t, "strategy": s, "intercept_us": i, "per_layer_us": 90.0}
            for t, s, i in ((1, "sequential", 3.0), (1, "multi_stream", 8.0),
                            (2, "sequential", 2.0), (2, "multi_stream", 9.0))]
    (folder / "replay_lengths.json").write_text(json.dumps({"env": {"device_name": gpu}, "records": recs}))
    return folder


def test_first_fork_cost_is_carried_labelled_or_measured_on_the_target_gpu(tmp_path, capsys):
    """Carried: the source's figure, labelled not measured. --replay-lengths: the median intercept excess of a run
    of the target GPU (median of 5 and 7 = 6 µs), labelled measured; another GPU's run is refused in one line."""
    doc = _doc("h200")
    doc["host"]["graph_first_fork_us"] = {"value": 4.0, "source": "measured (a run)"}
    source = parse_profile(doc)
    carried_doc = carried(_doc("b200"), source)
    figure = parse_profile(carried_doc).host.graph_first_fork_us
    assert figure.value == 4.0 and figure.source.startswith("NOT measured on")
    path = tmp_path / "h100.json"
    shutil.copy(PROFILES / "h100.json", path)
    gpu = load_profile(path).hardware.gpu
    assert main(["--to", str(path), "--replay-lengths", str(_replay_lengths(tmp_path / "h100run", gpu))]) == 0
    measured = load_profile(path).host.graph_first_fork_us
    assert measured.value == pytest.approx(6.0) and measured.source.startswith("measured (")
    before = path.read_text()
    assert main(["--to", str(path), "--replay-lengths", str(_replay_lengths(tmp_path / "h200run", "NVIDIA H200"))]) == 2
    assert path.read_text() == before
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"measured on NVIDIA H200, not on {gpu}" in err[0]
