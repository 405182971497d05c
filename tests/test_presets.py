"""The one table of model shapes: every preset and rank variant is a shape the real layer accepts, the
scenario schema offers exactly its strategies, and a scenario can take the shared expert away."""

from __future__ import annotations

import dataclasses

import pytest

from simulator.scenario import json_schema
from simulator.workloads.presets import PRESETS, STRATEGIES, get_preset


@pytest.mark.parametrize("name", [*PRESETS, "deepseek_v3@tp8", "kimi_k2@ep8", "qwen2_57b_a14b@tp4"])
def test_every_preset_is_a_shape_the_layer_runs(name: str) -> None:
    assert get_preset(name).check() is None


def test_scenario_strategies_are_the_table_s() -> None:
    compare = json_schema()["$defs"]["StrategiesSpec"]["properties"]["compare"]
    assert tuple(compare["items"]["enum"]) == STRATEGIES


def test_shared_intermediate_zero_removes_the_shared_expert() -> None:
    dims = dataclasses.replace(PRESETS["deepseek_v3"], shared_intermediate=0)  # a scenario's override
    assert not dims.has_shared and dims.fused_shared_chunks == 0
    assert "no shared expert" in (dims.applicable("multi_stream") or "")
    assert "n_shared and shared_intermediate" in (dims.check() or "")  # the real layer would refuse it
