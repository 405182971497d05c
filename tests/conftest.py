"""Shared pytest set-up: tests marked ``gpu`` are skipped where torch sees no CUDA/ROCm device."""

from __future__ import annotations

from pathlib import Path

import pytest


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA/ROCm GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def moe_trace(tmp_path: Path) -> Path:
    """A synthetic eager Kineto trace of one MoE layer (gate, shared experts, routed experts, combine)."""
    from tests.data.kineto.synth import Synth, moe_layer

    synth = Synth()
    moe_layer(synth)
    path = tmp_path / "moe.json"
    path.write_text(synth.dumps())
    return path
