"""Per-op attribution of traced kernels (hand-built traces) and the measured solo tables' keys."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.fit_kernels import solo_tables
from calibration.fit_traces import case_specs, op_points, top_level_ops
from calibration.microbench import shapes
from simulator.cost import table_time
from simulator.profile import load_profile


def _trace(ops: list[tuple[str, float, float]], launches: list[tuple[float, str, float]]) -> dict:
    """cpu ops (name, ts, dur); launches (host ts, device category, device dur), one runtime call each."""
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "ts": ts, "dur": d, "args": {}} for n, ts, d in ops]
    for i, (ts, cat, dur) in enumerate(launches):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1.0,
                       "args": {"correlation": 100 + i}})
        events.append({"ph": "X", "cat": cat, "name": f"k{i}", "ts": 1000.0 + i, "dur": dur,
                       "args": {"correlation": 100 + i}})
    return {"traceEvents": events}


def test_top_level_ops_sum_their_device_work() -> None:
    trace = _trace(
        [("aten::linear", 0, 10), ("aten::addmm", 1, 8), ("aten::t", 20, 1), ("aten::silu", 30, 5),
         ("aten::zeros", 40, 5), ("aten::fill_", 41, 2)],
        [(2, "kernel", 7.0), (3, "kernel", 1.5), (31, "kernel", 2.0), (42, "gpu_memset", 0.5), (60, "kernel", 9.0)])
    ops = top_level_ops(trace)
    # the addmm's two kernels belong to the linear; the view op has no device work; the memset counts;
    # a launch outside every op (host ts 60) is not attributed
    assert [(o.name, o.device_us, o.kernels) for o in ops] == [
        ("aten::linear", 8.5, 2), ("aten::silu", 2.0, 1), ("aten::zeros", 0.5, 1)]


def test_op_points_align_with_the_builder(tmp_path: Path) -> None:
    profile = load_profile("h200-datasheet")
    case = {"preset": "qwen3_30b_a3b", "tokens": 4, "strategy": "sequential", "mode": "eager",
            "trace": "traces/t.json.gz"}
    specs = case_specs(case, profile)
    ops = [(f"aten::op{i}", 10.0 * i, 5.0) for i in range(len(specs))]
    launches = [(10.0 * i + 1, "kernel", float(i + 1)) for i in range(len(specs))]
    (tmp_path / "traces").mkdir()
    with gzip.open(tmp_path / "traces" / "t.json.gz", "wt") as fh:
        json.dump(_trace(ops, launches), fh)
    points, kernels, notes = op_points(tmp_path, [case, {**case, "mode": "graph"}], profile)
    assert notes == []
    assert set(kernels) == set(points) and set(kernels.values()) == {1}  # one kernel per op in this trace
    expected: dict[tuple, list[float]] = {}  # the same op on the same shape twice: averaged
    for i, s in enumerate(specs):
        if s.op_key:
            expected.setdefault((s.op_key, s.flops, s.bytes, s.sm, s.rows), []).append(i + 1.0)
    got = {(k, p.flops, p.bytes, p.sm, p.rows): p.dur_us for k, pts in points.items() for p in pts}
    assert got == pytest.approx({k: sum(v) / len(v) for k, v in expected.items()})
    # one op short: reported, not used
    with gzip.open(tmp_path / "traces" / "t.json.gz", "wt") as fh:
        json.dump(_trace(ops[:-1], launches[:-1]), fh)
    points, kernels, notes = op_points(tmp_path, [case], profile)
    assert points == {} and kernels == {} and "not aligned" in notes[0]


def test_solo_tables_key_shapes_as_the_builder_does() -> None:
    recs = [{"shape": shapes.gemm_spec(16, 7168, 4096), "median_us": 11.0},
            {"shape": shapes.gemm_spec(1, 7168, 4096), "median_us": 9.0},
            {"shape": shapes.gemm_spec(1, 7168, 4096), "median_us": 11.0},
            {"shape": {"op": "grouped_mm", "K": 2048, "N": 7168, "counts": [2, 0, 4, 0]}, "median_us": 21.0},
            {"shape": shapes.elementwise_spec("add", 8, 7168), "median_us": 3.0},
            {"shape": shapes.copy_spec(1 << 20), "median_us": 3.0}]
    tables = solo_tables(recs, node_gap_us=1.0)
    assert set(tables) == {"mm K=7168 N=4096", "grouped_mm K=2048 N=7168", "add N=7168"}  # no copy in the layer
    # duplicates averaged, the node gap taken off
    assert [v for p in tables["mm K=7168 N=4096"]["points"] for v in p] == pytest.approx([1.0, 9.0, 16.0, 10.0])
    # 6 rows on 2 active experts: x = 3 rows per expert, µs per expert (one count only: no fixed cost)
    assert tables["grouped_mm K=2048 N=7168"]["fixed_us"] == 0.0
    assert list(tables["grouped_mm K=2048 N=7168"]["points"][0]) == pytest.approx([3.0, 10.0])
    assert list(tables["add N=7168"]["points"][0]) == pytest.approx([8.0, 2.0])


def test_grouped_tables_split_a_fixed_cost() -> None:
    """Durations 10 + 3·active µs at about one row per expert, 60 µs for 10 experts at 8 rows each: the fixed
    cost comes out as the intercept (10), the per-expert points as (60 − 10) / 10 = 5 at x = 8 and 3 near
    x = 1, where x = 1 and 1.125 (within 15%) are merged."""
    def rec(counts: list[int], us: float) -> dict:
        return {"shape": {"op": "grouped_mm", "K": 64, "N": 64, "counts": counts}, "median_us": us}

    recs = [rec([1] * 4, 22.0), rec([1] * 8, 34.0), rec([1] * 7 + [2], 34.0), rec([8] * 10, 60.0)]
    (table,) = solo_tables(recs, node_gap_us=0.0).values()
    assert table["fixed_us"] == pytest.approx(10.0)
    (x0, y0), (x1, y1) = table["points"]
    assert x0 == pytest.approx((1.0 * 1.0 * 1.125) ** (1 / 3)) and y0 == pytest.approx(3.0)
    assert x1 == pytest.approx(8.0) and y1 == pytest.approx(5.0)


def test_grouped_tables_hold_the_few_expert_times_of_a_concave_curve() -> None:
    """Per-expert time falls slowly with the experts hit (DeepSeek-V3's gate_up GEMM measured 179, 343, 655,
    1221, 2135, 3492 µs at 8 … 190 experts, one row each): the fixed cost is fitted to relative residuals, so the
    table holds every count within 5 %. A plain least-squares line puts the intercept near 67 µs and the
    8-expert time (decode's) 15 % high."""
    measured = [(8, 179.0), (16, 343.0), (32, 655.0), (61, 1221.0), (113, 2135.0), (190, 3492.0)]
    recs = [{"shape": {"op": "grouped_mm", "K": 64, "N": 64, "counts": [1] * c}, "median_us": us}
            for c, us in measured]
    (table,) = solo_tables(recs, node_gap_us=0.0).values()
    for count, us in measured:
        assert table["fixed_us"] + count * table_time(table["points"], 1.0) == pytest.approx(us, rel=0.05)
