"""Profiles: loading by name and path, one-line errors, host costs per mode, sharing model, describe()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.profile import available_profiles, load_profile, parse_profile
from simulator.sharing import FluidSharing

DATASHEETS = ("h200-datasheet", "h100", "mi300x", "b200")


def test_datasheet_profiles_ship_and_say_so() -> None:
    assert set(DATASHEETS) <= set(available_profiles())
    for name in DATASHEETS:
        p = load_profile(name)
        assert p.provenance == "datasheet"
        carried = p.interference.carried_from
        sharing = f", sharing carried from {carried}" if carried else ""
        origin = p.kernel_tables_from
        tables = f", kernel times measured on {origin.gpu}" if origin is not None else ""
        assert p.describe() == f"{name} (DATASHEET figures{sharing}{tables}, not calibrated)"
        assert carried is None or "NOT measured" in p.interference.source


@pytest.mark.parametrize(("name", "sms", "hbm_GBps", "tflops"), [
    ("h200-datasheet", 132, 4800, 989),     # NVIDIA H200 datasheet / Hopper whitepaper
    ("h100", 132, 3350, 989),               # NVIDIA H100 datasheet (H100 SXM) / Hopper whitepaper
    ("mi300x", 304, 5300, 1307.4),          # AMD MI300X datasheet
    ("b200", 148, 8000, 2250),              # NVIDIA HGX B200 datasheet (4.5 PF sparse BF16 / 2)
])
def test_datasheet_figures(name: str, sms: int, hbm_GBps: float, tflops: float) -> None:
    p = load_profile(name)
    assert p.hardware.sm_count == sms
    assert p.ceilings.hbm_GBps.value == hbm_GBps
    assert p.ceilings.bf16_tflops.value == tflops
    assert "datasheet" in p.ceilings.hbm_GBps.source.lower()


def test_unknown_profile_lists_the_available_ones() -> None:
    with pytest.raises(InputError) as err:
        load_profile("no-such-gpu")
    msg = str(err.value)
    assert "no-such-gpu" in msg and "mi300x" in msg and "\n" not in msg


def test_load_by_path_and_errors(tmp_path: Path) -> None:
    doc = json.loads(load_profile("mi300x").model_dump_json())
    doc["name"] = "copy"
    good = tmp_path / "copy.json"
    good.write_text(json.dumps(doc))
    assert load_profile(good).name == "copy"
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    with pytest.raises(InputError, match="malformed JSON"):
        load_profile(bad)
    with pytest.raises(InputError, match="no such profile file"):
        load_profile(tmp_path / "missing.json")
    del doc["ceilings"]["hbm_GBps"]["source"]
    with pytest.raises(InputError, match="source"):
        parse_profile(doc, "x.json")


def test_calibrated_describe() -> None:
    doc = json.loads(load_profile("h200-datasheet").model_dump_json())
    doc.update(name="h200", provenance="calibrated", date="2026-12-02")
    assert parse_profile(doc).describe() == "h200 (calibrated on NVIDIA H200, 2026-12-02)"


def test_host_costs_per_mode() -> None:
    p = load_profile("h200-datasheet")
    eager, graph = p.host_costs("eager"), p.host_costs("graph")
    assert eager.launch_us == p.host.launch_us.value > 0
    assert eager.kernel_gap_us == p.host.kernel_gap_us.value
    assert graph.launch_us == graph.record_us == graph.wait_us == graph.set_stream_us == 0
    assert graph.kernel_gap_us == p.host.node_gap_us.value
    with pytest.raises(InputError):
        p.host_costs("lazy")  # type: ignore[arg-type]


def test_sharing_model_and_family_fallback() -> None:
    p = load_profile("h200-datasheet")
    model = p.sharing_model()
    assert isinstance(model, FluidSharing)
    assert model.rates([(0.2, 0.2, 0.0)]) == [1.0]
    assert p.family("no-such-family") == p.kernel_families["default"]
    doc = json.loads(p.model_dump_json())
    del doc["kernel_families"]["default"]
    with pytest.raises(InputError, match="no kernel family"):
        parse_profile(doc).family("no-such-family")
