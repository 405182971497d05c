"""Block placement (``simulator.placement``) on hand-computed timelines and its invariants.

Every program below launches its kernels at time 0 (no host costs) with no bandwidth or tensor demand, so
only the SM caps decide the rates; 132 SMs as on the H200."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine import simulate
from simulator.placement import PlacementSharing, issue_class, latency_class, placement_for
from simulator.profile import MemoryLatency, load_profile
from tests.helpers_programs import launch, program, times

SHARING = PlacementSharing(sm_count=132)


def _gemm(name: str, stream: str, dur: float, blocks: int, per_sm: int, warps: int | None = None) -> dict:
    return launch(name, stream, dur, sm=min(1.0, blocks / 132), bw=0.0, tc=0.0, blocks=blocks,
                  blocks_per_sm=per_sm, warps_per_block=warps)


def test_light_blocks_packed_beside_full_sm_blocks_keep_their_cap_for_life():
    """S: 96 full-SM blocks (one per SM) on main; R: 112 light blocks, 4 per SM, on aux, started after S. R's
    blocks need 112/4 = 28 SMs and find the 36 S leaves free: packed there, R runs at 36/112 of its solo rate for
    its whole life, even after S ends at 20: 10 µs of work end at 10 × 112 / 36 = 31.11 µs, later than the two in
    sequence (30 µs)."""
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("R", "aux", 10, 112, 4)]), SHARING)
    got = times(r)
    assert got["S"] == pytest.approx((0, 20))
    assert got["R"] == pytest.approx((0, 10 * 112 / 36))
    assert r.makespan_us > 30


def test_packed_blocks_slow_by_the_warps_on_the_busiest_sm():
    """With ``issue_warps`` 5 (an SM runs 5 resident warps at full speed): R, 112 blocks of 4 warps, one per SM
    alone (4 warps: full speed), packed beside S onto the 36 free SMs: the busiest holds ceil(112 / 36) = 4 blocks,
    16 warps, 16 / 5 = 3.2 times slower: its 10 µs end at 32 for life. Beside a 40-block S (92 SMs free) the
    busiest holds 2 blocks, 8 warps: 1.6 times slower (the blocks' share of the SMs would say 112 / 92 = 1.22):
    ends at 16."""
    sharing = PlacementSharing(sm_count=132, issue_warps=5.0)
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("R", "aux", 10, 112, 6, warps=4)]), sharing)
    assert times(r)["R"] == pytest.approx((0, 32))
    r = simulate(program([_gemm("S", "main", 5, 40, 1), _gemm("R", "aux", 10, 112, 6, warps=4)]), sharing)
    assert times(r)["R"] == pytest.approx((0, 16))


def test_an_xmma_kernel_takes_its_class_issue_warps():
    """With ``issue_warps`` 5 and 20 for the ``xmma`` class: an xmma GEMM of 384 two-warp blocks (12 per SM),
    3 per SM alone (6 warps: full speed at 20), packed beside S onto the 36 free SMs: the busiest holds 11 blocks,
    22 warps, 22 / 20 = 1.1 times slower: its 10 µs end at 11. The same blocks under another name take 5: 22 / 5
    over 6 / 5 = 3.67 times slower, 36.67."""
    sharing = PlacementSharing(sm_count=132, issue_warps=5.0, issue_warps_by_class=(("xmma", 20.0),))
    xmma = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x1x1_ffma"
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm(xmma, "aux", 10, 384, 12, warps=2)]), sharing)
    assert times(r)[xmma] == pytest.approx((0, 11))
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("simt", "aux", 10, 384, 12, warps=2)]), sharing)
    assert times(r)["simt"] == pytest.approx((0, 10 * 22 / 6))
    assert issue_class(xmma) == "xmma" and issue_class("cutlass_80_simt_sgemm_64x64_8x5_tn_align1") is None


def test_a_launch_is_classed_by_the_library_kernel_it_names():
    """The shape path names its launches by op (``router_gemm``) and records the library kernel apart
    (``library_kernel``): block placement classes it by that kernel. The xmma router of the test above, named
    ``router_gemm``, ends at 11 (its class's 20 warps), not at 36.67 (the default 5)."""
    sharing = PlacementSharing(sm_count=132, issue_warps=5.0, issue_warps_by_class=(("xmma", 20.0),))
    xmma = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x1x1_ffma"
    router = {"launch": {**_gemm("router_gemm", "aux", 10, 384, 12, warps=2)["launch"], "library_kernel": xmma}}
    r = simulate(program([_gemm("S", "main", 20, 96, 1), router]), sharing)
    assert times(r)["router_gemm"] == pytest.approx((0, 11))


def test_blocks_that_saturate_an_sm_alone_slow_by_the_extra_blocks_only():
    """With ``issue_warps`` 4: R, 264 blocks of 4 warps, 2 per SM alone (ceil(264 / 132); 8 warps: already 2 times
    an SM's full-speed warps), packed beside S onto 36 SMs: the busiest holds ceil(264 / 36) = 8 blocks, 32
    warps: 8 / 2 = 4 times its solo time: 10 µs end at 40. Without the warps per block it slows by the blocks'
    share of the SMs: 132 / 36."""
    sharing = PlacementSharing(sm_count=132, issue_warps=4.0)
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("R", "aux", 10, 264, 8, warps=4)]), sharing)
    assert times(r)["R"] == pytest.approx((0, 40))
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("R", "aux", 10, 264, 8)]), sharing)
    assert times(r)["R"] == pytest.approx((0, 10 * 132 / 36))


def test_blocks_that_do_not_all_fit_pack_the_free_sms_and_the_kernel_waits_for_them():
    """S holds 128 SMs for 20 µs; R: 64 light blocks of 4 warps, 6 per SM, 10 µs alone (one per SM). The 4 free
    SMs take 24 of its blocks, 6 each: 24 warps, 6 times what runs at full speed (``issue_warps`` 4), so those end
    60 µs after the start; the other 40 wait for S: R's share while S runs is 4 / 64 (1.25 µs of its work), then
    1: done by 28.75, but it ends with its packed blocks at 60. With 2 per SM (8 warps: 2 times, 20 µs) the
    waiting blocks end later: 28.75. Without ``issue_warps`` the blocks only wait (28.75)."""
    s = _gemm("S", "main", 20, 128, 1)
    packing = PlacementSharing(issue_warps=4.0)
    for per_sm, sharing, end in ((6, packing, 60.0), (2, packing, 28.75), (6, SHARING, 28.75)):
        got = times(simulate(program([s, _gemm("R", "aux", 10, 64, per_sm, warps=4)]), sharing))
        assert got["R"] == pytest.approx((0, end))
        assert got["S"] == pytest.approx((0, 20))


def test_once_its_waiting_blocks_are_done_a_kernel_holds_only_its_packed_sms():
    """As above (``issue_warps`` 4, R's 24 packed blocks end at 60, its waiting ones at 28.75), with G, 128 full-SM
    blocks for 10 µs, queued on main behind S. At 20 G finds R's 64 blocks spread over 64 SMs and gets the other
    68: rate 68/128 until R's waiting blocks are done at 28.75 (4.6484 µs of its work), then R holds only the 4
    SMs of its packed blocks and G's 128 blocks all fit: G ends at 28.75 + 10 - 4.6484 = 34.1016. R still ends
    at 60."""
    program_ = program([_gemm("S", "main", 20, 128, 1), _gemm("R", "aux", 10, 64, 6, warps=4),
                        _gemm("G", "main", 10, 128, 1)])
    got = times(simulate(program_, PlacementSharing(issue_warps=4.0)))
    assert got["R"] == pytest.approx((0, 60))
    assert got["G"] == pytest.approx((20, 28.75 + 10 - 8.75 * 68 / 128))


def test_full_sm_blocks_wait_for_untouched_sms_then_take_the_freed_ones():
    """G: 132 full-SM blocks started beside S (96 full-SM blocks): it gets the 36 untouched SMs, rate 36/132,
    until S ends at 20 (20 × 36/132 = 5.4545 µs of its 10 done), then the whole GPU: ends at 24.545 µs."""
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("G", "aux", 10, 132, 1)]), SHARING)
    assert times(r)["G"] == pytest.approx((0, 20 + 10 - 20 * 36 / 132))


def test_light_blocks_that_fit_alone_run_at_full_speed():
    """A 40-block kernel beside S (96 SMs): its 40 blocks spread one per SM over the 36 free SMs would not fit
    one per SM, but 40/8 = 5 SMs' worth of its blocks fit when packed: cap 36/40 for life. A 30-block kernel
    fits one per SM: rate 1."""
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("small", "aux", 3, 30, 8)]), SHARING)
    assert times(r)["small"] == pytest.approx((0, 3))
    r = simulate(program([_gemm("S", "main", 20, 96, 1), _gemm("packed", "aux", 9, 40, 8)]), SHARING)
    assert times(r)["packed"] == pytest.approx((0, 9 * 40 / 36))


def test_kernels_without_geometry_take_their_sm_demand_as_spread():
    """No launch geometry: spread = the sm demand, light, never packed. 0.5 beside S's 96/132 gets the free
    36/132, rate (36/132) / 0.5 until S ends at 20 (10.909 µs of work), then 1: 20 µs of work end at 29.09."""
    ops = [_gemm("S", "main", 20, 96, 1), launch("e", "aux", 20, sm=0.5, bw=0.0, tc=0.0)]
    r = simulate(program(ops), SHARING)
    assert times(r)["e"] == pytest.approx((0, 20 + 20 - 20 * (36 / 132) / 0.5))


def test_light_kernels_that_turn_over_share_the_sms_fairly():
    """Two kernels without geometry, spreads 0.6 and 0.8 (no full-SM block): together they ask 1.4 of the SMs,
    so both run at 1 / 1.4 until a (10 µs) ends at 14; b has done 10 of its 20 and ends at 24."""
    ops = [launch("a", "main", 10, sm=0.6, bw=0.0, tc=0.0), launch("b", "aux", 20, sm=0.8, bw=0.0, tc=0.0)]
    got = times(simulate(program(ops), SHARING))
    assert got["a"] == pytest.approx((0, 14))
    assert got["b"] == pytest.approx((0, 24))


def test_latency_bound_kernels_slow_with_the_hbm_the_others_draw():
    """S (96 full-SM blocks) draws 0.8 of HBM; e (no geometry: latency-bound) runs beside it. With the curve
    (0.4 → 1.0, 0.8 → 2.0), e runs at half speed: its 5 µs end at 10. Alone afterwards it would run at 1."""
    curve = MemoryLatency(points=[(0.4, 1.0), (0.8, 2.0)], source="hand-made")
    sharing = PlacementSharing(sm_count=132, memory_latency=curve)
    ops = [launch("S", "main", 20, sm=96 / 132, bw=0.8, tc=0.0, blocks=96, blocks_per_sm=1),
           launch("e", "aux", 5, sm=0.01, bw=0.0, tc=0.0)]
    got = times(simulate(program(ops), sharing))
    assert got["e"] == pytest.approx((0, 10))
    assert got["S"] == pytest.approx((0, 20))


def test_a_kernel_that_demands_nothing_keeps_its_traced_speed():
    """A traced kernel that overlapped another stream in the trace gets no demand (its duration holds its
    contention): beside S drawing 0.8 of HBM it is not slowed again by the latency curve."""
    curve = MemoryLatency(points=[(0.4, 1.0), (0.8, 2.0)], source="hand-made")
    ops = [launch("S", "main", 20, sm=96 / 132, bw=0.8, tc=0.0, blocks=96, blocks_per_sm=1),
           launch("c", "aux", 5, sm=0.0, bw=0.0, tc=0.0)]
    assert times(simulate(program(ops), PlacementSharing(memory_latency=curve)))["c"] == pytest.approx((0, 5))


def test_latency_classes_by_kernel_name():
    """Sorting networks and scans, selections and softmaxes are worked on chip; the rest are round trips."""
    assert latency_class("void at::native::radixSortKVInPlace<-2, -1, 16, 2, long>") == "sort"
    assert latency_class("void at_cuda_detail::cub::detail::scan::DeviceScanKernel<int>") == "sort"
    assert latency_class("void at::native::sbtopk::gatherTopK<float, unsigned int, 1, false>") == "topk"
    assert latency_class("topkGatingSoftmax<float, 8>") == "topk"  # vLLM's fused routing kernel
    assert latency_class("void (anonymous namespace)::softmax_warp_forward<float>") == "softmax"
    for memory_bound in ("void dot_kernel<float, 128, 0>", "Memcpy DtoD (Device -> Device)",
                         "void at::native::(anonymous namespace)::indexSelectSmallIndex<float>", ""):
        assert latency_class(memory_bound) == "gather"


def test_each_latency_class_slows_by_its_own_curve():
    """Beside S drawing 0.8 of HBM, three latency-bound kernels of 5 µs on streams of their own: the sort by the
    sort curve (0.8 → 1.25: ends at 6.25), the copy by the gather curve (0.8 → 4: ends at 20), the top-k, whose
    class has no curve, by the pooled points (0.8 → 2: ends at 10)."""
    curve = MemoryLatency(points=[(0.4, 1.0), (0.8, 2.0)], classes={"sort": [(0.8, 1.25)], "gather": [(0.8, 4.0)]},
                          source="hand-made")
    ops = [launch("S", "main", 30, sm=96 / 132, bw=0.8, tc=0.0, blocks=96, blocks_per_sm=1),
           launch("radixSortKV", "a", 5, sm=0.01, bw=0.0, tc=0.0), launch("copy", "b", 5, sm=0.01, bw=0.0, tc=0.0),
           launch("gatherTopK", "c", 5, sm=0.01, bw=0.0, tc=0.0)]
    streams = {name: "nonblocking" for name in ("main", "a", "b", "c")}
    got = times(simulate(program(ops, streams), PlacementSharing(memory_latency=curve)))
    assert got["radixSortKV"] == pytest.approx((0, 6.25))
    assert got["copy"] == pytest.approx((0, 20))
    assert got["gatherTopK"] == pytest.approx((0, 10))
    assert got["S"] == pytest.approx((0, 30))


def test_a_gemv_of_light_blocks_waits_on_memory_and_a_tensor_core_gemm_does_not():
    """Beside S (96 full-SM blocks drawing 0.8 of HBM), with the curve 0.8 → 2 and ``issue_warps`` 5: a GEMV of 30
    light blocks of 4 warps (8 per SM) fits the 36 free SMs one per SM, so its placement leaves it at full speed,
    but its blocks wait on memory, and its SMs' 4 warps have none to spare: its 5 µs end at 10. A tensor-core
    GEMM of 30 full-SM blocks fits too, and is not slowed: ends at 5."""
    curve = MemoryLatency(points=[(0.4, 1.0), (0.8, 2.0)], source="hand-made")
    sharing = PlacementSharing(memory_latency=curve, issue_warps=5.0)
    stream_s = launch("S", "main", 20, sm=96 / 132, bw=0.8, tc=0.0, blocks=96, blocks_per_sm=1)
    got = times(simulate(program([stream_s, _gemm("dot_kernel", "aux", 5, 30, 8, warps=4)]), sharing))
    assert got["dot_kernel"] == pytest.approx((0, 10))
    got = times(simulate(program([stream_s, _gemm("nvjet_tst", "aux", 5, 30, 1)]), sharing))
    assert got["nvjet_tst"] == pytest.approx((0, 5))


def test_a_packed_gemm_slows_by_the_larger_of_its_packing_and_its_memory_latency():
    """Beside S (96 full-SM blocks drawing 0.8 of HBM) with ``issue_warps`` 5: a SIMT GEMM of 112 blocks of 4 warps
    packed onto the 36 free SMs has 16 warps on its busiest SM: 3.2 times slower for life. Round trips 2× longer
    (the curve 0.8 → 2) fit inside that: it ends at 32 (10 µs). Round trips 4× longer (0.8 → 4) outlast it: 1 / 4
    while S runs (20 µs: 5 µs of work), then 1 / 3.2 for the other 5 µs: ends at 36. Without packing, the same
    kernel (fitting one block per SM) slows by the latency alone."""
    stream_s = launch("S", "main", 20, sm=96 / 132, bw=0.8, tc=0.0, blocks=96, blocks_per_sm=1)
    for slowdown, end in ((2.0, 32.0), (4.0, 36.0)):
        curve = MemoryLatency(points=[(0.8, slowdown)], source="hand-made")
        sharing = PlacementSharing(memory_latency=curve, issue_warps=5.0)
        got = times(simulate(program([stream_s, _gemm("sgemm", "aux", 10, 112, 6, warps=4)]), sharing))
        assert got["sgemm"] == pytest.approx((0, end))
        got = times(simulate(program([stream_s, _gemm("sgemm", "aux", 5, 30, 6, warps=4)]), sharing))
        assert got["sgemm"] == pytest.approx((0, 5 * slowdown))


def test_only_the_round_trip_share_of_a_latency_bound_kernel_slows():
    """Beside S (full-SM blocks drawing 0.4 of HBM; no bandwidth shortage), with round trips 3× longer (the curve
    0.4 → 3): a kernel that draws nothing alone spends all its time on round trips, its 5 µs end at 15; one that
    streams at 0.5 of the ceiling alone spends half its time streaming (shared as bandwidth, untouched here) and
    half on round trips: 5 × (0.5 + 0.5 × 3) = 10."""
    curve = MemoryLatency(points=[(0.4, 3.0)], source="hand-made")
    stream_s = launch("S", "main", 30, sm=96 / 132, bw=0.4, tc=0.0, blocks=96, blocks_per_sm=1)
    for bw, end in ((0.0, 15.0), (0.5, 10.0)):
        got = times(simulate(program([stream_s, launch("e", "aux", 5, sm=0.01, bw=bw, tc=0.0)]),
                             PlacementSharing(memory_latency=curve)))
        assert got["e"] == pytest.approx((0, end))
        assert got["S"] == pytest.approx((0, 30))


def test_memory_latency_classes_are_checked_like_the_points():
    with pytest.raises(ValueError):
        MemoryLatency(points=[(0.4, 1.1)], classes={"sort": [(0.8, 2.0), (0.4, 1.1)]}, source="out of order")
    with pytest.raises(ValueError):
        MemoryLatency(points=[(0.4, 1.1)], classes={"sort": []}, source="empty")


def test_memory_latency_curve():
    curve = MemoryLatency(points=[(0.4, 1.1), (0.8, 2.0)], source="hand-made")
    assert curve.slowdown(0.0) == 1.0
    assert curve.slowdown(0.2) == pytest.approx(1.05)
    assert curve.slowdown(0.6) == pytest.approx(1.55)
    assert curve.slowdown(1.0) == 2.0
    with pytest.raises(ValueError):
        MemoryLatency(points=[(0.8, 2.0), (0.4, 1.1)], source="out of order")
    with pytest.raises(ValueError):
        MemoryLatency(points=[(0.4, 0.9)], source="a speed-up")


def test_placement_for_takes_the_profile_gpu_and_capacities():
    profile = load_profile("h200")
    sharing = placement_for(profile)
    assert sharing.sm_count == profile.hardware.sm_count
    assert sharing.bw_capacity == profile.interference.params["bw_capacity"]
    assert sharing.memory_latency == profile.memory_latency
    assert profile.issue_warps is not None and sharing.issue_warps == profile.issue_warps.value
    assert dict(sharing.issue_warps_by_class) == {cls: fig.value for cls, fig in profile.issue_warps_by_kernel.items()}


def test_packing_slowdown():
    from simulator.placement import packing_slowdown

    assert packing_slowdown(112, 4, 36, 132, 4.0) == pytest.approx(4.0)  # 4 blocks, 16 warps vs 1 block, 4
    assert packing_slowdown(112, 4, 132, 132, 4.0) == pytest.approx(1.0)
    assert packing_slowdown(100, 1, 50, 132, 4.0) == pytest.approx(1.0)  # 2 one-warp blocks: under 4 warps
    assert packing_slowdown(300, 8, 100, 132, 4.0) == pytest.approx(1.0)  # 3 blocks on the busiest SM both ways


kernels = st.lists(st.tuples(st.sampled_from(["main", "aux"]), st.floats(0.5, 50.0), st.integers(1, 400),
                             st.sampled_from([1, 2, 4, 8, 16])), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(kernels)
def test_placement_invariants(spec):
    """In-order streams, nothing earlier than it could, at least the longer stream's solo sum, deterministic.
    (Unlike the fluid forms, the serial sum is no upper bound: a packed kernel keeps its cap after the kernels
    that crowded it end.)"""
    ops = [_gemm(f"k{i}", stream, dur, blocks, per_sm) for i, (stream, dur, blocks, per_sm) in enumerate(spec)]
    first = simulate(program(ops), SHARING)
    again = simulate(program(ops), SHARING)
    assert (first.kernels, first.makespan_us) == (again.kernels, again.makespan_us)
    runs = {k.name: k for k in first.kernels}
    for stream in ("main", "aux"):
        mine = [runs[f"k{i}"] for i, s in enumerate(spec) if s[0] == stream]
        for before, after in itertools.pairwise(mine):
            assert after.start_us >= before.end_us - 1e-9
        for k, (_, dur, _, _) in zip(mine, [s for s in spec if s[0] == stream], strict=True):
            assert k.end_us - k.start_us >= dur - 1e-6
    longest = max(sum(d for s, d, _, _ in spec if s == stream) for stream in ("main", "aux"))
    assert first.makespan_us >= longest - 1e-6
