"""Where a scenario leaves its profile's calibrated range: the MoE block's kernels that look up a measured table
the profile does not have (a shape never measured) or at a size beyond the table's measured points
(extrapolated). Read from the profile's ``kernel_tables`` only: a calibrated profile's, or the tables a datasheet
profile carries from another GPU of the same chip (``kernel_tables_from``); the other datasheet profiles have none
(and every output already says they are not calibrated)."""

from __future__ import annotations

from functools import lru_cache

from simulator.cost import CostModel, costed_by_shard_law
from simulator.evaluate import StepCase
from simulator.workloads.builder import ProgramBuilder
from simulator.workloads.decode_step import emit_moe_block

LISTED = 4  # table names quoted in one warning


@lru_cache(maxsize=1024)
def range_warnings(case: StepCase, strategies: tuple[str, ...]) -> tuple[str, ...]:
    """One line per way the case leaves the measured range of its profile's kernel tables (memoised: sweeps ask
    for neighbouring cases that share a block)."""
    profile, link = case.platform.resolve()
    if not profile.kernel_tables:
        return ()
    b = ProgramBuilder(host=profile.host_costs("eager"), cost=CostModel(profile))
    for strategy in dict.fromkeys(strategies):
        if case.dims.applicable(strategy) is None:
            emit_moe_block(b, case.dims, case.par, link, case.tokens, case.tokens_group, strategy)
    missing: set[str] = set()
    by_law: set[str] = set()
    beyond: dict[str, tuple[float, float]] = {}
    for spec in b.specs:
        if spec.table is None:
            continue
        table = profile.kernel_tables.get(spec.table)
        if table is None:
            (by_law if costed_by_shard_law(spec, profile) else missing).add(spec.table)
            continue
        largest = table.points[-1][0]
        x = max(x for x, _ in ((spec.x, spec.count), *spec.parts))
        if x > largest * 1.001:
            beyond[spec.table] = (max(x, beyond.get(spec.table, (0.0, 0.0))[0]), largest)
    out = []
    origin = profile.kernel_tables_from
    where = f"profile {profile.name} ({origin.gpu if origin is not None else profile.hardware.gpu})"
    if beyond:
        names = [f"{k}: {x:g} > {hi:g}" for k, (x, hi) in sorted(beyond.items())]
        out.append(f"{case.tokens} tokens/rank of {case.dims.name} go beyond the sizes measured by {where}, so "
                   f"these kernel times are extrapolated: {_listed(names)}")
    if missing:
        out.append(f"{case.dims.name} has kernel shapes {where} never measured (costed from its fitted kernel "
                   f"families instead of measured tables): {_listed(sorted(missing))}")
    if by_law:
        out.append(f"{case.dims.name} has grouped GEMM shapes {where} never measured (costed by its grouped GEMM "
                   f"shard law, from a measured whole-expert table where there is one): {_listed(sorted(by_law))}")
    return tuple(out)


def _listed(items: list[str]) -> str:
    more = len(items) - LISTED
    return ", ".join(items[:LISTED]) + (f" and {more} more" if more > 0 else "")
