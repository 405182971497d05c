"""``benchmarks/placement_table.py``: overlap arithmetic and the shared GEMM's blocks read from a hand-made
probe record; a missing run is a one-line input error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers_benchmarks import load_benchmark


def _script():
    return load_benchmark("placement_table")


def test_overlap_and_blocks() -> None:
    script = _script()
    assert script.overlap({"S": 20.0, "R": 10.0, "S|R": 45.0}) == pytest.approx(-0.5)  # slower than in sequence
    record = {"kernels": {"fields": ["name", "dur_us", "grid"], "graphs": {"S": [
        [0, 9.0, [4, 24, 1]], [1, 1.5, [64, 1, 1]]]}}}
    assert script.shared_blocks(record) == 96  # the longest kernel's grid: 4 × 24


def test_the_packing_law() -> None:
    script = _script()
    # 128 threads × 80 registers: 4 warps × 2560 registers = 10240 per block, 6 per SM; 25.6 KB of shared memory
    # (+1 KB reserved) allows 8: 6 per SM
    router = {"name": "r", "grid": [112, 1, 1], "block": [128, 1, 1], "registers per thread": 80,
              "shared memory": 25600}
    assert script.blocks_per_sm({}, router) == 6
    # 112 blocks of 4 warps, one per SM alone; beside 96 full-SM blocks 36 SMs are free (216 slots): the busiest
    # holds ceil(112 / 36) = 4 blocks, 16 warps; at 5 warps per SM at full speed that is 16 / 5 slower
    assert script.packed_us(12.0, 112, 6, 4, 96, 5.0) == pytest.approx(12.0 * 16 / 5)
    # 40 blocks on the 36 free: the busiest holds 2, 8 warps: 8 / 5 slower; at 10 warps per SM: as alone
    assert script.packed_us(12.0, 40, 6, 4, 96, 5.0) == pytest.approx(12.0 * 8 / 5)
    assert script.packed_us(12.0, 40, 6, 4, 96, 10.0) == pytest.approx(12.0)
    assert script.packed_us(12.0, 20, 6, 4, 96, 5.0) == 12.0  # 20 blocks on 36 free SMs: as alone
    assert script.packed_us(12.0, 112, 6, 4, 128, 5.0) is None  # 4 free SMs hold 24 of 112 blocks: the rest wait
    assert script.packed_us(12.0, 112, 6, 4, 132, 5.0) is None


def test_a_missing_run_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    monkeypatch.setattr(script, "RUNS", {"fp32": tmp_path / "none.json.gz", "bf16": tmp_path / "none.json.gz"})
    assert script.main([]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_op_table_from_a_hand_made_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One softmax record: its kernel (1 block of 128 threads) 2.0 µs alone, 4.0 beside S; S 10, R 5, S|R 12 µs
    → overlap 1 − 12 / 15 = +20 %; a record sized as another preset is left out by ``sized_as``."""
    import gzip
    import json

    def record(router: str) -> dict:
        fields = ["name", "dur_us", "grid", "block"]
        return {"shared": "s", "router": router, "tokens": 2, "median_us": {"S": 10.0, "R": 5.0, "S|R": 12.0},
                "kernels": {"fields": fields, "graphs": {"S": [[0, 9.0, [96, 1, 1], [384, 1, 1]]],
                                                         "R": [[1, 2.0, [1, 1, 1], [128, 1, 1]]],
                                                         "S|R": [[0, 9.5, [96, 1, 1], [384, 1, 1]],
                                                                 [1, 4.0, [1, 1, 1], [128, 1, 1]]]}}}
    (tmp_path / "placement_probe_softmax.json.gz").write_bytes(
        gzip.compress(json.dumps({"records": [record("a"), record("b")]}).encode()))
    script = _script()
    monkeypatch.setattr(script, "PROBE", tmp_path)
    rows = [line for line in script.op_markdown("softmax", 2, "a").splitlines() if line.startswith("| s ")]
    assert rows == ["| s (96) | a | 1 × 128 | 2.0 → 4.0 | +20 % |"]


def test_contention_table_from_a_hand_made_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One shared GEMM of 96 blocks, N × K = 1000 × 1000 bf16 (2 MB) in 1.0 µs; against a 4 MB/µs ceiling its
    HBM share is 0.5; each routing kernel 2.0 µs alone, 3.0 beside: slowdown 1.50."""
    import gzip
    import json

    fields = ["name", "dur_us", "grid", "block"]
    record = {"shared": "s", "router": "a", "tokens": 2, "N": 1000, "K": 1000,
              "median_us": {"S": 1.0, "R": 2.0, "S|R": 3.0},
              "kernels": {"fields": fields, "graphs": {"S": [[0, 1.0, [96, 1, 1], [384, 1, 1]]],
                                                       "R": [[1, 2.0, [1, 1, 1], [128, 1, 1]]],
                                                       "S|R": [[1, 3.0, [1, 1, 1], [128, 1, 1]]]}}}
    for op in ("topk", "softmax", "sort", "gather"):
        (tmp_path / f"placement_probe_{op}.json.gz").write_bytes(
            gzip.compress(json.dumps({"records": [record]}).encode()))
    script = _script()
    monkeypatch.setattr(script, "PROBE", tmp_path)
    monkeypatch.setattr("simulator.profile.Profile.hbm_bytes_per_us", property(lambda self: 4.0e6))
    [row] = [line for line in script.contention_markdown().splitlines() if line.startswith("| s ")]
    assert row == "| s (96) | 0.50 | 1.50 | 1.50 | 1.50 | 1.50 |"


def test_prefill_table_from_a_hand_made_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Call 26's layout: one record per routing step at 1024 tokens; S 10, R 5, S|R 16 µs → overlap
    1 − 16 / 15 = −7 %; the step's kernel 2.0 µs alone, 3.0 beside. A token count the run lacks: one error line."""
    import gzip
    import json

    fields = ["name", "dur_us", "grid", "block"]
    record = {"shared": "s", "router": "deepseek_v3", "tokens": 1024, "median_us": {"S": 10.0, "R": 5.0, "S|R": 16.0},
              "kernels": {"fields": fields, "graphs": {"S": [[0, 9.0, [132, 1, 1], [384, 1, 1]]],
                                                       "R": [[1, 2.0, [8, 1, 1], [128, 1, 1]]],
                                                       "S|R": [[1, 3.0, [8, 1, 1], [128, 1, 1]]]}}}
    for op in ("router", "topk", "softmax", "sort", "gather"):
        (tmp_path / f"placement_probe_{op}_prefill.json.gz").write_bytes(
            gzip.compress(json.dumps({"records": [record]}).encode()))
    script = _script()
    monkeypatch.setattr(script, "PROBE", tmp_path)
    [row] = [line for line in script.prefill_markdown(1024).splitlines() if line.startswith("| s ")]
    assert row == "| s (132) |" + " -7 % (2.0 → 3.0) |" * 5
    assert script.main(["--prefill", "--tokens", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no placement-probe run at 16 tokens") and err.count("\n") == 1


def test_the_law_per_kernel_class_on_a_hand_made_run(tmp_path: Path) -> None:
    """An xmma router of 384 two-warp blocks (64 threads × 80 registers: 12 per SM) beside 96 full-SM blocks
    (384 threads × 168 registers): alone 3 per SM, beside S 11 on the busiest of the 36 free SMs, 22 warps; with
    the h200 profile's xmma figure w the law says max(1, 22 / w) / max(1, 6 / w); measured 22 / 20 µs = 1.10×.
    An elementwise kernel as R (no GEMM) and a record of another router are left out."""
    import gzip
    import json

    from simulator.profile import load_profile

    script = _script()
    xmma = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x1x1_ffma"

    def record(router: str, name: str) -> dict:
        fields = ["name", "dur_us", "grid", "block", "registers per thread", "shared memory"]
        shared = [0, 9.0, [96, 1, 1], [384, 1, 1], 168, 0]
        kernel = [1, 20.0, [384, 1, 1], [64, 1, 1], 80, 0]
        return {"shared": "s", "router": router, "tokens": 2, "median_us": {"S": 9.0, "R": 20.0, "S|R": 25.0},
                "kernels": {"names": ["gemm", name], "fields": fields, "graphs": {
                    "S": [shared], "R": [kernel], "S|R": [shared, [1, 22.0, *kernel[2:]]]}}}

    run = tmp_path / "probe.json.gz"
    run.write_bytes(gzip.compress(json.dumps({"records": [
        record("kimi_k2", xmma), record("kimi_k2", "elementwise_kernel"), record("other", xmma)]}).encode()))
    text = script.law_markdown(run, ("kimi_k2",))
    w = load_profile("h200").issue_warps_by_kernel["xmma"].value
    law = max(1.0, 22 / w) / max(1.0, 6 / w)
    rows = [line for line in text.splitlines() if line.startswith("| kimi_k2")]
    assert len(rows) == 1 and "(xmma," in rows[0] and "| 3 → 11 |" in rows[0]
    assert rows[0].endswith(f"| 1.10× | {law:.2f}× |")
    assert "Records packed whole: 1" in text
