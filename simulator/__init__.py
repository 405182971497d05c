"""moesim's simulator, as one facade (names load on first use, so ``import simulator`` stays cheap).

>>> import simulator as ms
>>> program = ms.load_program("scenarios/programs/event_pair_fork_join.yaml")
>>> ms.simulate(program).makespan_us                       # timing (SimPy engine)
>>> ms.find_hazards(program), ms.expand(program).capture_errors   # races, graph-capture legality
>>> ms.evaluate(ms.load_scenario("scenarios/dsv3_h200_dp8.yaml")).to_json_dict()   # the main job
>>> ms.run_whatif("trace.json.gz", "moe.shared_experts")    # trace-driven what-if

Results convert to plain dicts (``to_json_dict``), ready for ``pandas.DataFrame``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Program": "simulator.ir",
    "load_program": "simulator.ir",
    "parse_program": "simulator.ir",
    "simulate": "simulator.engine",
    "SimResult": "simulator.result",
    "FluidSharing": "simulator.sharing",
    "expand": "simulator.expand",
    "find_hazards": "simulator.hazards",
    "to_chrome_trace": "simulator.perfetto",
    "load_profile": "simulator.profile",
    "available_profiles": "simulator.profile",
    "load_scenario": "simulator.scenario",
    "evaluate": "simulator.evaluate",
    "sweep": "simulator.sweep",
    "recommend": "simulator.thresholds",
    "read_trace": "simulator.kineto.reader",
    "run_whatif": "simulator.kineto.replay",
    "InputError": "simulator.errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
