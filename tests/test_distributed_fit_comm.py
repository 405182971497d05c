"""calibration.fit_comm recovers known link figures and SM shares from synthetic bench_collectives data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration import fit_comm
from simulator.errors import InputError
from simulator.profile import load_profile, parse_profile

LAT, BW = 6.0, 350.0  # µs, GB/s per direction


def _wire(coll: str, world: int, nbytes: float) -> float:
    # written out here (not imported from the bench) so the test checks the formulas too
    return (2.0 if coll == "all_reduce" else 1.0) * (world - 1) / world * nbytes


def _doc(lat: float = LAT, bw: float = BW, worlds: tuple[int, ...] = (2, 8), noise: float = 0.01) -> dict:
    times = []
    for world in worlds:
        for coll in ("all_reduce", "all_to_all"):
            for i, exp in enumerate(range(10, 29)):
                wire = _wire(coll, world, 2**exp)
                jitter = 1.0 + noise * (1 if i % 2 else -1)  # ±1 %, alternating
                times.append({"collective": coll, "world": world, "bytes": 2**exp, "wire_bytes": wire,
                              "median_us": (lat + wire / (bw * 1e3)) * jitter})
    sm = [{"collective": "all_reduce", "sm_share": 0.10, "covered": True},
          {"collective": "all_reduce", "sm_share": 0.14, "covered": True},
          {"collective": "all_to_all", "sm_share": 0.20, "covered": True},
          {"collective": "all_to_all", "sm_share": 0.90, "covered": False}]
    return {"schema": "moesim.collectives/1", "env": {"world": 8, "device_name": "NVIDIA H200",
                                                      "comm_backend": "nccl", "date": "2026-12-02"},
            "times": times, "sm": sm}


def test_recovers_latency_and_bandwidth() -> None:
    fit = fit_comm.fit_link(_doc()["times"])
    assert fit.latency_us == pytest.approx(LAT, rel=0.03)
    assert fit.bandwidth_GBps == pytest.approx(BW, rel=0.03)
    assert fit.points == 76 and fit.max_rel_error < 0.03


def test_zero_latency_is_clamped_not_negative() -> None:
    fit = fit_comm.fit_link(_doc(lat=0.0, noise=0.0)["times"])
    assert fit.latency_us == pytest.approx(0.0, abs=1e-6)
    assert fit.bandwidth_GBps == pytest.approx(BW, rel=1e-6)
    # a fit through a negative intercept is refitted through zero
    times = [{"collective": "all_reduce", "world": 2, "wire_bytes": w, "median_us": t}
             for w, t in ((1e6, 1.0), (2e6, 3.0), (3e6, 5.0))]
    assert fit_comm.fit_link(times).latency_us == 0.0


def test_sm_share_uses_covered_records_only() -> None:
    sm = fit_comm.sm_share(_doc()["sm"])
    assert sm["value"] == pytest.approx(0.14)  # median of 0.10, 0.14, 0.20
    assert sm["per_collective"] == pytest.approx({"all_reduce": 0.12, "all_to_all": 0.20})
    assert (sm["records"], sm["left_out_uncovered"]) == (3, 1)
    assert fit_comm.sm_share([{"collective": "all_reduce", "sm_share": 0.5, "covered": False}]) is None


def test_single_rank_data_cannot_fit() -> None:
    with pytest.raises(InputError, match=">= 2 ranks"):
        fit_comm.fit_link(_doc(worlds=(1,))["times"])


def test_apply_gives_a_valid_profile_with_the_fit() -> None:
    base = load_profile("h200-datasheet").model_dump(mode="json")
    doc = fit_comm.apply(base, [_doc()], ["m/collectives.json"])
    p = parse_profile(doc)
    assert p.link.bandwidth_GBps.value == pytest.approx(BW, rel=0.03)
    assert p.link.latency_us.value == pytest.approx(LAT, rel=0.03)
    assert "measured" in p.link.latency_us.source and "m/collectives.json" in p.link.bandwidth_GBps.source
    assert set(p.fit["link"]["per_world"]) == {"2", "8"}
    assert p.fit["link"]["per_collective"]["all_to_all"]["bandwidth_GBps"] == pytest.approx(BW, rel=0.03)
    assert p.measurements[-1] == "m/collectives.json"
    assert p.kernel_families == load_profile("h200-datasheet").kernel_families  # nothing else touched


def test_cli_writes_profile_and_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "collectives.json"
    src.write_text(json.dumps(_doc()))
    out = tmp_path / "h200-comm.json"
    assert fit_comm.main([str(src), "--profile", "h200-datasheet", "--out", str(out)]) == 0
    assert load_profile(out).link.bandwidth_GBps.value == pytest.approx(BW, rel=0.03)
    assert "collectives.json" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "moesim.microbench/1"}))
    out2 = tmp_path / "never.json"
    assert fit_comm.main([str(bad), "--profile", "h200-datasheet", "--out", str(out2)]) == 2
    err = capsys.readouterr().err
    assert "not a bench_collectives document" in err and err.count("\n") == 1
    assert not out2.exists()
