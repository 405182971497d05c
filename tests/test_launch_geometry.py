"""The GEMM launches a profile records (``calibration.fit_geometry``) and how the shape path uses them
(``LayerEmitter.recorded``, ``simulator.placement.sharing_for``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.fit_geometry import grouped_keys, kernel_label, launch_geometries, router_key, shared_keys
from simulator.errors import InputError
from simulator.interference import ResidencySharing
from simulator.ir import Launch
from simulator.placement import PlacementSharing, sharing_for
from simulator.profile import LaunchGeometries, Profile, load_profile
from simulator.workloads.moe_layer import moe_layer_program
from simulator.workloads.presets import get_preset

PRESET, TOKENS = "deepseek_v3@tp2", 4
SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(Params)"
NVJET = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT"
DOT = "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<float const>>>"


def _fact(kernel: str, blocks: int, per_sm: int, warps: int) -> dict:
    return {"kernel": kernel, "blocks": blocks, "blocks_per_sm": per_sm, "warps_per_block": warps}


def _profile(keys: list[str], tokens: int = TOKENS) -> Profile:
    """H200 with only ``keys`` recorded at ``tokens`` (a grouped GEMM: at its rows, tokens × top_k)."""
    base = load_profile("h200")
    rows = tokens * get_preset(PRESET).top_k
    launches = {key: {rows if key.startswith("grouped") else tokens:
                      _fact(SIMT if key.startswith("mm_fp32") else NVJET, 112, 6 if "fp32" in key else 1, 4)}
                for key in keys}
    table = LaunchGeometries(launches=launches, source="test")
    return base.model_copy(update={"launch_geometry": table})


def _program(profile: Profile, tokens: int = TOKENS):
    return moe_layer_program(get_preset(PRESET), tokens, "multi_stream", profile, mode="graph", iterations=2)


def _all_keys() -> list[str]:
    dims = get_preset(PRESET)
    return [*shared_keys(dims), router_key(dims), *grouped_keys(dims)]


def test_every_gemm_recorded_places_the_layer():
    """With every GEMM of the layer recorded at its token count, each GEMM launch carries its blocks and library
    kernel, and the layer is shared by block placement."""
    profile = _profile(_all_keys())
    program = _program(profile)
    gemms = [op for op in program.ops if isinstance(op, Launch) and op.family in ("gemm", "gemm_fp32", "grouped_gemm")]
    assert gemms and all(op.blocks is not None for op in gemms)
    router = next(op for op in gemms if op.kernel == "router_gemm")
    assert (router.blocks, router.blocks_per_sm, router.warps_per_block, router.library_kernel) == (112, 6, 4, SIMT)
    assert isinstance(sharing_for(profile, program), PlacementSharing)


@pytest.mark.parametrize("drop", ["router", "tokens", "table"])
def test_a_layer_with_an_unrecorded_gemm_keeps_the_profile_form(drop: str):
    """One GEMM not recorded (the router), another token count, or no table at all: the profile's own form."""
    keys = [k for k in _all_keys() if not (drop == "router" and k.startswith("mm_fp32"))]
    profile = _profile(keys, tokens=TOKENS * 2 if drop == "tokens" else TOKENS)
    if drop == "table":
        profile = profile.model_copy(update={"launch_geometry": None})
    assert isinstance(profile.sharing_model(), ResidencySharing)
    assert isinstance(sharing_for(profile, _program(profile)), ResidencySharing)


GROUPED = "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<>>>"
SILU = "void at::native::vectorized_elementwise_kernel<4, silu_and_mul>"


def _probe_file(path: Path, router_kernel: str, shared_blocks: int = 96, shared_streams: int = 1) -> Path:
    """A ``kernels_real.geometry_probe`` run of one point: the aux stream's two shared GEMMs (with their
    activation), the main stream's router and two grouped GEMMs (with the cast and the activation)."""
    def kernel(name: str, grid: list[int], block: list[int], regs: int, smem: int) -> dict:
        return {"name": name, "grid": grid, "block": block, "registers per thread": regs, "shared memory": smem}

    gemm = kernel(NVJET, [4, shared_blocks // 4, 1], [384, 1, 1], 168, 164292)
    act = kernel(SILU, [8, 1, 1], [128, 1, 1], 16, 0)
    grouped = kernel(GROUPED, [132, 1, 1], [384, 1, 1], 168, 200000)
    shared = [[gemm, act, gemm]] * shared_streams
    main = [act, kernel(router_kernel, [2, 1, 56], [128, 1, 1], 80, 25600), grouped, act, grouped]
    doc = {"env": {}, "records": [{"preset": PRESET, "tokens": TOKENS, "streams": [*shared, main]}]}
    path.mkdir(parents=True, exist_ok=True)
    (path / "geometry.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path / "geometry.json.gz"


def test_fit_geometry_reads_a_probe_run(tmp_path: Path):
    """Blocks from the grid, blocks per SM from registers / shared memory (80 × 128 registers: 6 per SM), warps
    from the block; keyed as the shape path asks for them."""
    doc = launch_geometries([_probe_file(tmp_path / "a", SIMT)], "test")
    table = LaunchGeometries.model_validate(doc)
    dims = get_preset(PRESET)
    router = table.at(router_key(dims), TOKENS)
    assert router is not None and (router.blocks, router.blocks_per_sm, router.warps_per_block) == (112, 6, 4)
    gate_up = table.at(shared_keys(dims)[0], TOKENS)
    assert gate_up is not None and (gate_up.blocks, gate_up.blocks_per_sm) == (96, 1)
    assert table.at(router_key(dims), TOKENS + 1) is None
    grouped = [table.at(key, TOKENS * dims.top_k) for key in grouped_keys(dims)]
    assert all(g is not None and (g.blocks, g.warps_per_block) == (132, 12) for g in grouped)


def test_fit_geometry_keys_a_router_run_as_two_gemm_kernels_by_the_first(tmp_path: Path):
    """cuBLAS may run the router's GEMM as a split pass and a one-slice pass, both GEMM kernels: the first is the
    launch the shape path places."""
    path = _probe_file(tmp_path, SIMT)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    main = doc["records"][0]["streams"][-1]
    second = {**main[1], "grid": [1, 1, 1]}
    main.insert(2, second)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    router = LaunchGeometries.model_validate(launch_geometries([path], "test")).at(router_key(get_preset(PRESET)),
                                                                                     TOKENS)
    assert router is not None and router.blocks == 112


def test_fit_geometry_rejects_a_probe_record_it_cannot_split(tmp_path: Path):
    """Two streams beside the one with the grouped GEMMs: which holds the shared experts is not told."""
    with pytest.raises(InputError, match="GEMMs found"):
        launch_geometries([_probe_file(tmp_path, SIMT, shared_streams=2)], "test")


def test_fit_geometry_leaves_out_the_dot_gemv_and_rejects_disagreeing_sources(tmp_path: Path):
    dot = launch_geometries([_probe_file(tmp_path / "dot", DOT)], "test")
    assert router_key(get_preset(PRESET)) not in dot["launches"]
    assert "1 launches of cuBLAS's dot_kernel left out" in dot["source"]
    first, other = _probe_file(tmp_path / "a", SIMT), _probe_file(tmp_path / "b", SIMT, shared_blocks=128)
    assert "5 launches recorded twice" in launch_geometries([first, first], "test")["source"]
    with pytest.raises(InputError, match="an earlier source recorded"):
        launch_geometries([first, other], "test")


def test_a_long_kernel_name_is_kept_short_and_apart():
    """CUTLASS's mangled grouped GEMM names run past a thousand characters: the profile keeps their first 120 and a
    hash of the whole, so two such kernels differing only at the end stay two; short names are kept whole."""
    stem = "_ZN7cutlass13device_kernelI" + "x" * 400
    first, second = kernel_label(stem + "A"), kernel_label(stem + "B")
    assert first != second and first.startswith(stem[:120]) and len(first) < 160
    assert kernel_label(NVJET) == NVJET
