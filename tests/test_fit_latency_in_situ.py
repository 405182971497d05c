"""calibration.fit_latency_in_situ: the routing chain's slowdown per band of HBM share, from the layer traces."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from calibration.fit_latency_in_situ import MIN_KERNELS, curve, memory_latency, slowdowns
from simulator.profile import MemoryLatency

DECODE = Path(__file__).resolve().parent.parent / "calibration" / "measurements" / "h200" / "2026-12-03"


def test_the_curve_is_the_median_per_band_made_non_decreasing():
    """Band 0.1-0.3 (middle 0.2): eight kernels, median of 1.0 ×4 and 3.0 ×4 is 2.0; band 0.3-0.5: eight at 1.5,
    below 2.0, so it stays 2.0 (a kernel does not speed up as the load grows); band 0.5-0.7: too few kernels,
    left out; band ≥ 0.9 (middle 0.95, its top taken at 1): eight at 4.0. Other classes' rows do not count."""
    rows = ([("gather", 0.2, 1.0)] * 4 + [("gather", 0.25, 3.0)] * 4 + [("gather", 0.4, 1.5)] * MIN_KERNELS
            + [("gather", 0.6, 9.0)] * (MIN_KERNELS - 1) + [("gather", 0.95, 4.0)] * MIN_KERNELS
            + [("sort", 0.2, 7.0)] * MIN_KERNELS)
    assert curve(rows, ("gather",)) == [(0.2, 2.0), (0.4, 2.0), (0.95, 4.0)]
    assert curve(rows, ("topk",)) == [(0.0, 1.0)]


@pytest.mark.skipif(not (DECODE / "layer_traces").is_dir(), reason="needs the committed layer traces")
def test_the_document_from_the_layer_traces_is_a_profile_curve_and_holds_presets_out():
    doc = memory_latency(DECODE / "layer_traces", DECODE / "eager_traces", "call 19")
    parsed = MemoryLatency.model_validate({k: doc[k] for k in ("points", "classes")} | {"source": doc["source"]})
    for points in (parsed.points, *parsed.classes.values()):
        assert [u for u, _ in points] == sorted(u for u, _ in points)
        assert all(b >= a for (_, a), (_, b) in itertools.pairwise(points))
    every = slowdowns(DECODE / "layer_traces", DECODE / "eager_traces")
    without = slowdowns(DECODE / "layer_traces", DECODE / "eager_traces", ("qwen2_57b_a14b",))
    assert 0 < len(without) < len(every)
