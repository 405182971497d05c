"""benchmarks/chip_transfer.py and shape_geometry.py: the traced kernels taken as the layer's GEMMs, their launch
geometry, and the bad-input path."""

import subprocess
import sys
from pathlib import Path

from calibration.layer_traces import is_gemm

ROOT = Path(__file__).resolve().parent.parent


def test_gemm_kernels_are_told_from_reductions_and_data_preparation():
    assert is_gemm("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT")
    assert is_gemm("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(...)")
    assert is_gemm("void dot_kernel<float, 128, 0, cublasDotParams<...>>")
    assert not is_gemm("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)")
    assert not is_gemm("void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t>(...)")
    assert not is_gemm("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>")


def test_launch_geometry_from_occupancy_limits():
    from calibration.layer_traces import launch_geometry

    # cuBLAS nvjet: 384 threads of 168 registers fill the register file (64 Ki), and 224 KiB of shared memory
    nvjet = {"grid": [4, 22, 1], "block": [384, 1, 1], "registers per thread": 168, "shared memory": 229772}
    assert launch_geometry(nvjet) == (88, 1, 12)
    # CUTLASS SIMT sgemm: 128 threads of 80 registers: 65536 // 10240 = 6 blocks per SM
    simt = {"grid": [1, 1, 112], "block": [128, 1, 1], "registers per thread": 80, "shared memory": 20480}
    assert launch_geometry(simt) == (112, 6, 4)
    # a tiny elementwise block: the 32-block limit
    tiny = {"grid": [1, 1, 1], "block": [32, 1, 1], "registers per thread": 16, "shared memory": 0}
    assert launch_geometry(tiny) == (1, 32, 1)


def test_an_unknown_profile_is_one_line_and_exit_2():
    out = subprocess.run([sys.executable, "benchmarks/chip_transfer.py", "--profile", "nope"], cwd=ROOT,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.returncode == 2
    assert out.stdout == "" and out.stderr.count("\n") == 1 and out.stderr.startswith("error: unknown profile")


def test_solo_shapes_of_one_run_against_themselves():
    from benchmarks.chip_transfer import FIRST_SOLO, solo_table
    from simulator.profile import load_profile

    rows = solo_table(FIRST_SOLO[-1], load_profile("h100"), load_profile("h200"))  # the grouped rerun: itself
    first_table = rows[2:rows.index("")]
    cells = {row.split(" | ")[0].strip("| "): row.split(" | ") for row in first_table}
    assert set(cells) == {"grouped_gemm"}  # a grouped-only run
    assert cells["grouped_gemm"][2] == "1.00" and cells["grouped_gemm"][5].startswith("0.0%")  # unchanged = itself
    assert cells["grouped_gemm"][3] == "1.00"  # the grouped GEMMs' rate fits under the H100's ceiling
    binned = rows[rows.index("") + 3:]  # by the bandwidth drawn: itself, so every measured ratio is 1
    assert binned and all(row.split(" | ")[3] == "1.00" for row in binned)
