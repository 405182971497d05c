"""benchmarks/chip_transfer.py: which traced kernels it takes as the layer's GEMMs, and its bad-input path."""

import subprocess
import sys
from pathlib import Path

from benchmarks.chip_transfer import is_gemm

ROOT = Path(__file__).resolve().parent.parent


def test_gemm_kernels_are_told_from_reductions_and_data_preparation():
    assert is_gemm("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT")
    assert is_gemm("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(...)")
    assert is_gemm("void dot_kernel<float, 128, 0, cublasDotParams<...>>")
    assert not is_gemm("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)")
    assert not is_gemm("void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t>(...)")
    assert not is_gemm("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>")


def test_an_unknown_profile_is_one_line_and_exit_2():
    out = subprocess.run([sys.executable, "benchmarks/chip_transfer.py", "--profile", "nope"], cwd=ROOT,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.returncode == 2
    assert out.stdout == "" and out.stderr.count("\n") == 1 and out.stderr.startswith("error: unknown profile")


def test_solo_shapes_of_one_run_against_themselves():
    from benchmarks.chip_transfer import FIRST_SOLO, solo_table
    from simulator.profile import load_profile

    rows = solo_table(FIRST_SOLO, load_profile("h100"), load_profile("h200"))
    cells = {row.split(" | ")[0].strip("| "): row.split(" | ") for row in rows[2:]}
    assert {"gemm", "grouped_gemm", "elementwise"} <= set(cells)
    assert all(cell[2] == "1.00" and cell[5].startswith("0.0%") for cell in cells.values())  # unchanged = itself
    assert float(cells["gemm"][3]) > 1.0  # the dense GEMMs follow the H100's lower HBM ceiling
    assert cells["grouped_gemm"][3] == "1.00"  # the grouped GEMMs' rate fits under it
