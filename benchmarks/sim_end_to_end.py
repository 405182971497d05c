"""Wall time of ``moesim sim`` as a whole process (imports, JSON decoding, validation, simulation, output)
on the engine-speed fork/join program written as JSON.

Usage: PYTHONPATH=. python benchmarks/sim_end_to_end.py [--pairs N] [--repeat R]   (4 × N kernels, 8 × N ops)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.engine_speed import fork_join_program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # The console script installed beside this interpreter, not the first ``moesim`` on PATH: that may be a
    # version manager's shim (pyenv's costs ~70 ms per call here) or another interpreter's install.
    moesim = Path(sys.executable).parent / "moesim"
    command = [str(moesim)] if moesim.is_file() else [sys.executable, "-m", "simulator.cli.main"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "program.json"
        path.write_text(json.dumps(fork_join_program(args.pairs)))
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([*command, "sim", str(path)], check=True, stdout=subprocess.DEVNULL)
            best = min(best, time.perf_counter() - t0)
    print(f"{' '.join(Path(c).name for c in command)} sim on {4 * args.pairs} kernels ({8 * args.pairs} ops, JSON): "
          f"{best:.3f} s wall, best of {args.repeat}")


if __name__ == "__main__":
    main()
