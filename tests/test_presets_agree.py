"""The simulator keeps its own copy of the model shapes (it must not import torch-side code): it must agree
with the real layer's presets field by field."""

from __future__ import annotations

import dataclasses

import pytest

torch_presets = pytest.importorskip("kernels_real.config").PRESETS
from simulator.workloads.presets import PRESETS  # noqa: E402


@pytest.mark.parametrize("name", sorted(torch_presets))
def test_simulator_preset_matches_kernels_real(name):
    real = torch_presets[name]
    sim = PRESETS[name]
    for field in dataclasses.fields(real):
        assert getattr(sim, field.name) == getattr(real, field.name), field.name
