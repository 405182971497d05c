"""The layer's configuration: a model shape of ``simulator.workloads.presets`` (the one table, torch-free),
checked when made, and the errors the layer raises."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from simulator.errors import InputError
from simulator.workloads.presets import MoEDims
from simulator.workloads.presets import get_preset as get_dims


class ConfigError(ValueError):
    """A layer configuration, input shape or strategy that the layer cannot run."""


class NotApplicableError(ConfigError):
    """A strategy that does not apply to this configuration (e.g. multi-stream without a shared expert)."""


@dataclasses.dataclass(frozen=True)
class MoEConfig(MoEDims):
    """A ``MoEDims`` the layer can run: ``MoEDims.check`` is applied on construction (and on every
    ``dataclasses.replace``), ConfigError with its one line otherwise."""

    def __post_init__(self) -> None:
        reason = self.check()
        if reason:
            raise ConfigError(reason)


def preset_error(names: Iterable[str]) -> str | None:
    """The error of the first unknown or invalid preset among ``names`` (None when every one is known)."""
    for name in names:
        try:
            get_preset(name)
        except ConfigError as err:
            return str(err)
    return None


def get_preset(name: str) -> MoEConfig:
    """The preset called ``name`` (``PRESET@tpN`` / ``PRESET@epN``: one rank's compute), checked;
    ConfigError naming the known ones otherwise."""
    try:
        dims = get_dims(name)
    except InputError as err:
        raise ConfigError(str(err)) from None
    return MoEConfig(**dataclasses.asdict(dims))
