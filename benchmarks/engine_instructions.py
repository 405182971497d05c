"""CPU instructions the engine spends per simulated kernel (valgrind's count): a machine-independent,
repeatable A/B figure where wall-clock kernels/s on a shared VM moves by tens of percent.

Usage: python benchmarks/engine_instructions.py [--tree DIR ...] [--pairs N] [--no-host-costs]

For each tree (default: this checkout; give ``--tree`` twice to compare two checkouts, e.g. a ``git worktree``
of the base commit), its ``simulator`` and ``benchmarks`` folders are copied to one fixed scratch path (the
count shifts by ~2 % with the length of the import path and the environment, so every tree runs from the same
path with an empty environment and ``PYTHONHASHSEED=0``), then the benchmark program of ``engine_speed.py`` is
parsed, once alone and once parsed and simulated, under ``valgrind --tool=cachegrind``; the difference over
4 × N kernels is printed. Needs valgrind on PATH. Counts are not times: a change that saves instructions but
moves work into slower memory accesses can still lose; confirm with interleaved ``engine_speed.py`` runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

_SCRATCH = Path("/tmp/moesim-engine-instructions")
_CHILD = """\
import os, sys
sys.path.insert(0, ".")
from benchmarks.engine_speed import fork_join_program
from simulator.engine import simulate
from simulator.ir import parse_program
program = parse_program(fork_join_program({pairs}, host_costs={host_costs}))
if {simulate}:
    simulate(program)
os._exit(0)  # no interpreter teardown: it would walk the results and blur the difference
"""


def instructions(pairs: int, host_costs: bool, simulate: bool) -> int:
    """Instructions valgrind counts for one child run in the scratch tree."""
    code = _CHILD.format(pairs=pairs, host_costs=host_costs, simulate=simulate)
    run = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", code],
        cwd=_SCRATCH, env={"PYTHONHASHSEED": "0"}, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"the child run failed: {run.stderr.strip().splitlines()[-1:]}")
    return int(found.group(1).replace(",", ""))


def per_kernel(tree: Path, pairs: int, host_costs: bool) -> float:
    """Instructions per kernel of ``simulate`` in ``tree``, run from the scratch path."""
    shutil.rmtree(_SCRATCH, ignore_errors=True)
    for package in ("simulator", "benchmarks"):
        shutil.copytree(tree / package, _SCRATCH / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", "simulator", "benchmarks"], cwd=_SCRATCH,
                   env={"PYTHONHASHSEED": "0"}, check=True, stdout=subprocess.DEVNULL)  # imports read .pyc
    parse_only = instructions(pairs, host_costs, simulate=False)
    with_run = instructions(pairs, host_costs, simulate=True)
    return (with_run - parse_only) / (4 * pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append",
                        help="checkout to measure (repeatable; default: this one)")
    parser.add_argument("--pairs", type=int, default=2_500, help="fork/join pairs (4 kernels each)")
    parser.add_argument("--no-host-costs", action="store_true", help="zero host API costs")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("error: valgrind is not on PATH (Debian: apt-get install valgrind)", file=sys.stderr)
        raise SystemExit(2)
    trees = args.tree or [Path(__file__).resolve().parent.parent]
    for tree in trees:
        if not (tree / "simulator" / "engine.py").is_file():
            print(f"error: {tree} has no simulator/engine.py", file=sys.stderr)
            raise SystemExit(2)
    try:
        for tree in trees:
            count = per_kernel(tree, args.pairs, not args.no_host_costs)
            print(f"{tree}: {count:,.0f} instructions per kernel ({4 * args.pairs} kernels, "
                  f"host costs {'off' if args.no_host_costs else 'on'}; valgrind cachegrind, {os.uname().machine})")
    finally:
        shutil.rmtree(_SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
