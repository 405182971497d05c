"""Scenario schema: shipped files load, errors name the file, the field path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.errors import InputError
from simulator.scenario import json_schema, load_scenario, parse_scenario, parse_value, with_value

SHIPPED = sorted(Path(__file__).resolve().parents[1].joinpath("scenarios").glob("*.yaml"))
BASE = {"model": {"preset": "DeepSeek-V3"}, "platform": {"profile": "h200-datasheet"},
        "parallelism": {"tp": 1, "dp": 8, "ep": 8}, "load": {"concurrency": 4}}


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_scenarios_load(path: Path) -> None:
    assert load_scenario(path).model.moe_dims().layers > 0


def test_seed_scenarios_are_shipped() -> None:
    names = {p.name for p in SHIPPED}
    assert {"dsv3_mi300x_dp8.yaml", "dsv3_mi300x_tp8.yaml", "dsv3_h200_dp8.yaml", "dsv3_h200_tp8.yaml"} <= names


@pytest.mark.parametrize(("edit", "expected"), [
    (("load.concurrency", "many"), "load.concurrency: Input should be a valid integer"),
    (("load.concurrency", 0), "load.concurrency: got 0; expected a number ≥ 1 and ≤ 1048576"),
    (("load.concurrency", 10**30), "load.concurrency: got 1000000000000000000000000000000; expected a number ≥ 1"),
    (("load.input_len", "1e300"), "load.input_len: got the text '1e300' (YAML reads an exponent as a number only"),
    (("platform.link_latency_us", float("nan")), "link_latency_us: got nan; expected a finite number ≥ 0 and ≤ 1"),
    (("platform.link_bandwidth_GBps", float("inf")), "link_bandwidth_GBps: got inf; expected a finite number > 0"),
    (("thresholds.margin", 1.0), "thresholds.margin: got 1.0; expected a number ≥ 0 and < 1"),
    (("thresholds.concurrency", [1, 0]), "thresholds.concurrency[1]: got 0; expected a number ≥ 1 and ≤ 1048576"),
    (("platform.speed", 3), "platform.speed: Extra inputs are not permitted"),
    (("strategies.compare", ["overlap"]), "strategies.compare[0]: Input should be 'sequential'"),
    (("model.preset", "GPT-5"), "model: unknown MoE preset 'GPT-5'"),
    (("parallelism.ep", 4), "parallelism: DP attention needs expert parallelism over all GPUs"),
    (("parallelism", {"tp": 3}), "do not split"),
])
def test_errors_name_file_field_and_expectation(tmp_path: Path, edit: tuple[str, object], expected: str) -> None:
    path = _write(tmp_path, with_value(BASE, *edit))
    with pytest.raises(InputError) as err:
        load_scenario(path)
    message = str(err.value)
    assert message.startswith(str(path)) and expected in message and "\n" not in message


def test_up_to_five_errors_are_shown(tmp_path: Path) -> None:
    doc = BASE
    for field in ("tp", "dp", "ep"):
        doc = with_value(doc, f"parallelism.{field}", 0)
    for field in ("concurrency", "input_len", "output_len"):
        doc = with_value(doc, f"load.{field}", -1)
    with pytest.raises(InputError) as err:
        load_scenario(_write(tmp_path, doc))
    message = str(err.value)
    assert message.count("expected a number ≥ 1") == 5 and message.endswith("(and 1 more)")
    assert "parallelism.tp" in message and "load.input_len" in message


def test_set_values_in_exponent_form_are_numbers() -> None:
    assert parse_value("1e3") == 1000.0 and parse_value("2.5E-1") == 0.25
    assert parse_value("h200") == "h200" and parse_value("inf") == "inf" and parse_value("8") == 8


def test_missing_file_and_malformed_yaml(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_scenario(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [\n")
    with pytest.raises(InputError, match="malformed YAML"):
        load_scenario(bad)


def test_explicit_model_needs_its_dimensions() -> None:
    with pytest.raises(InputError, match=r"without a preset, give .*hidden"):
        parse_scenario({**BASE, "model": {"layers": 4}})
    s = parse_scenario({**BASE, "parallelism": {}, "model": {
        "name": "tiny", "layers": 4, "vocab": 1000,
        "moe": {"hidden": 256, "moe_intermediate": 128, "n_experts": 8, "top_k": 2, "shared_intermediate": 128,
                "n_shared": 1},
        "attention": {"kind": "gqa", "heads": 4, "kv_heads": 2, "head_dim": 64}}})
    dims = s.model.moe_dims()
    assert (dims.name, dims.layers, dims.moe_layers, dims.n_experts) == ("tiny", 4, 4, 8)
    assert s.model.step_shape().attention.kv_heads == 2


def test_preset_fields_can_be_overridden() -> None:
    s = parse_scenario(with_value(BASE, "model.moe.shared_intermediate", 1024))
    dims = s.model.moe_dims()
    assert dims.shared_intermediate == 1024 and dims.n_experts == 256
    assert s.model.step_shape().attention.kind == "mla"


def test_tokens_per_rank_and_into_the_moe() -> None:
    total = parse_scenario(with_value(with_value(BASE, "load.concurrency", 17), "load.concurrency_scope", "total"))
    assert total.load.tokens(8) == (3, 17)  # ceil(17 / 8) on the busiest rank
    per_rank = parse_scenario(with_value(BASE, "load.concurrency", 17))
    assert per_rank.load.tokens(8) == (17, 136)
    assert per_rank.load.kv_len() == 1024 + 512


def test_with_value_copies_and_rejects_bad_paths() -> None:
    out = with_value(BASE, "load.input_len", 2048)
    assert out["load"]["input_len"] == 2048 and "input_len" not in BASE["load"]
    with pytest.raises(InputError, match="not a mapping"):
        with_value(BASE, "model.preset.x", 1)


def test_json_schema_describes_the_sections() -> None:
    schema = json_schema()
    assert {"model", "platform", "parallelism", "load", "strategies"} <= set(schema["properties"])
    assert set(schema["required"]) == {"model", "platform", "load"}
