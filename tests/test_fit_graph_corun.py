"""The graph co-run fitter: pair programs against hand-derived timelines, the fork/join cost, recovery of a
known sharing parameter."""

from __future__ import annotations

import pytest

from calibration.fit_graph_corun import (
    Pieces,
    emitted_pieces,
    graph_join_us,
    grid_fit,
    pair_program,
    scaled,
    simulated_us,
)
from simulator.interference import ResidencySharing
from simulator.ir import HostCosts, Launch
from simulator.profile import load_profile
from simulator.sharing import FluidSharing


def _k(name: str, dur: float, sm: float = 0.01, bw: float = 0.01) -> Launch:
    return Launch(kernel=name, stream="main", dur_us=dur, sm=sm, bw=bw, tc=0.0, family="gemm")


def _pieces(s: float = 10.0, r: float = 4.0, g: float = 6.0, sleep: float = 3.0, **measured: float) -> Pieces:
    return Pieces("p", 1, {"S": (_k("s", s),), "R": (_k("r", r),), "G": (_k("g", g),)}, measured, sleep)


def test_pair_period_is_the_longer_branch_plus_the_join_edge():
    """S|R with join gap 2: S on aux waits main's ready (+2), R on main waits aux's done (+2) from the second
    replay on: the period is S + 2 = 12 (derivation in the module docstring's terms: one edge per set)."""
    host = HostCosts(node_join_gap_us=2.0)
    assert simulated_us(pair_program(_pieces(), "S|R", host), FluidSharing()) == pytest.approx(12.0)
    assert simulated_us(pair_program(_pieces(), "R|S", host), FluidSharing()) == pytest.approx(12.0)


def test_staggered_branch_starts_after_its_sleep():
    """S~|RG, no gaps: aux sleeps 3 then S 10 = 13 against R+G = 10 on main: period 13."""
    assert simulated_us(pair_program(_pieces(), "S~|RG", HostCosts()), FluidSharing()) == pytest.approx(13.0)
    assert simulated_us(pair_program(_pieces(), "S|~RG", HostCosts()), FluidSharing()) == pytest.approx(13.0)


def test_two_bandwidth_bound_branches_split_the_bandwidth():
    """S and G each draw all of HBM alone: under fluid sharing they take 2 × their solo time together."""
    p = Pieces("p", 1, {"S": (_k("s", 10, bw=1.0),), "R": (_k("r", 0.5),), "G": (_k("g", 10, bw=1.0),)}, {}, 0)
    assert simulated_us(pair_program(p, "S|G", HostCosts()), FluidSharing()) == pytest.approx(20.0)


def test_graph_join_pools_both_fork_joins_of_the_short_chains():
    """Short chains only (the 4000 µs one is left out): empty 2.5, 2, 3; tiny 4, 3, 4; pooled median 3."""
    recs = [{"median_us": {"RG": 10.0, "RG+fj0": 12.5, "RG+fj1": 14.0}},
            {"median_us": {"RG": 20.0, "RG+fj0": 22.0, "RG+fj1": 23.0}},
            {"median_us": {"RG": 5.0, "RG+fj0": 8.0, "RG+fj1": 9.0}},
            {"median_us": {"RG": 4000.0, "RG+fj0": 3900.0, "RG+fj1": 3950.0}}]
    got = graph_join_us(recs)
    assert got["empty_median_us"] == pytest.approx(2.5)
    assert got["tiny_median_us"] == pytest.approx(4.0)
    assert got["median_us"] == pytest.approx(3.0)
    assert got["n"] == 3


def test_scaling_matches_the_solo_graph_time_and_keeps_bytes():
    chain = (_k("a", 2.0, bw=0.5), _k("b", 6.0, bw=0.25))
    out = scaled(chain, solo_us=18.0, node_gap_us=1.0)  # 16 µs of kernels: × 2
    assert [k.dur_us for k in out] == [4.0, 12.0]
    assert [k.bw for k in out] == [0.25, 0.125]


def test_emitted_pieces_split_the_routed_path_at_the_first_grouped_gemm():
    pieces = emitted_pieces("deepseek_v3@tp8", 4, load_profile("h200"))
    assert [k.family for k in pieces["S"]][:1] == ["gemm"]
    assert pieces["G"][0].family == "grouped_gemm"
    assert all(k.family != "grouped_gemm" for k in pieces["R"])


def test_grid_fit_recovers_the_floor_that_made_the_measurements():
    """Measurements simulated under residency floor 0.2 (a slot-filling S beside a slot-hungry R) are fitted
    best by floor 0.2 of the grid."""
    truth = ResidencySharing(floor=0.2)
    host = HostCosts()
    pieces = []
    for r_sm in (0.5, 0.8):
        p = Pieces("p", 1, {"S": (_k("s", 10, sm=1.0, bw=0.3),), "R": (_k("r", 4, sm=r_sm),),
                            "G": (_k("g", 6, sm=0.3),)}, {}, 3.0)
        measured = {pair: simulated_us(pair_program(p, pair, host), truth) for pair in ("S|R", "R|S", "S|G")}
        pieces.append(Pieces(p.preset, p.tokens, p.launches, measured, p.sleep_us))
    params, _ = grid_fit(pieces, ResidencySharing, {"floor": (0.05, 0.2, 0.5)}, host, ("S|R", "R|S", "S|G"))
    assert params == {"floor": 0.2}
