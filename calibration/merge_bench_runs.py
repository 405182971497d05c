"""Merge per-preset ``kernels_real.bench`` outputs (one process per preset) into one run folder.

``python -m calibration.merge_bench_runs RUN`` takes every ``RUN/<preset>/`` a bench process wrote and leaves
``RUN/cases.json`` and ``RUN/kernels.json.gz`` (their records concatenated), ``RUN/traces/`` (all traces;
the records' ``traces/...`` paths stay right) and ``RUN/per_preset/<preset>/`` (each process's ``env.json`` and
``gains.md``), the layout ``benchmarks/whatif_accuracy.py --run`` reads.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path


def merge(run: Path) -> None:
    """Merge the bench outputs under ``run`` in place (presets in name order)."""
    parts = sorted(p for p in run.iterdir() if (p / "cases.json").is_file())
    if not parts:
        raise SystemExit(f"{run}: no <preset>/cases.json to merge")
    cases: list[dict] = []
    kernels: list[dict] = []
    (run / "traces").mkdir(exist_ok=True)
    for part in parts:
        cases += json.loads((part / "cases.json").read_text())
        kernels += json.loads((part / "kernels.json").read_text())
        for trace in (part / "traces").iterdir():
            trace.rename(run / "traces" / trace.name)
        kept = run / "per_preset" / part.name
        kept.mkdir(parents=True, exist_ok=True)
        for name in ("env.json", "gains.md"):
            (part / name).rename(kept / name)
        shutil.rmtree(part)
    (run / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    (run / "kernels.json.gz").write_bytes(gzip.compress(json.dumps(kernels).encode()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m calibration.merge_bench_runs RUN_FOLDER")
    merge(Path(sys.argv[1]))
