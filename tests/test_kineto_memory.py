"""The reader streams: memory follows the events it keeps, not the file (dropped events cost nothing). The
decoded block is made small here (16 kB) so that these small files span many blocks, as a big trace does."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from simulator.kineto import reader
from simulator.kineto.reader import read_trace
from tests.data.kineto.synth import write_large_trace

KERNELS = 2000


def _peak(path: Path) -> tuple[int, int]:
    gc.collect()
    tracemalloc.start()
    try:
        trace = read_trace(path, progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, len(trace.gpu_ops)


def test_memory_does_not_grow_with_dropped_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "BLOCK", 1 << 14)
    lean = tmp_path / "lean.json"
    fat = tmp_path / "fat.json"
    lean_size = write_large_trace(str(lean), KERNELS)
    fat_size = write_large_trace(str(fat), KERNELS, padding_per_kernel=6)
    assert fat_size > 2.5 * lean_size
    lean_peak, n_lean = _peak(lean)
    fat_peak, n_fat = _peak(fat)
    assert n_lean == n_fat == KERNELS
    # json.load of the lean file peaks at about 5.5 times its size; streaming keeps only compact records
    assert lean_peak < 3 * lean_size
    assert fat_peak < 1.2 * lean_peak
    assert fat_peak < fat_size / 1.2
