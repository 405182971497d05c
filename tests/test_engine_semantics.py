"""Every engine rule against a timeline derived by hand (the derivation is in each docstring)."""

from __future__ import annotations

import pytest

from simulator.engine import simulate
from simulator.sharing import FluidSharing
from tests.helpers_programs import launch, program, record, times, wait


def test_stream_fifo():
    """b queued behind a on one stream: a 0..10, b 10..15."""
    r = simulate(program([launch("a", "main", 10), launch("b", "main", 5)]))
    assert times(r) == {"a": (0, 10), "b": (10, 15)}
    assert r.makespan_us == 15
    assert r.streams["main"] == 15


def test_record_snapshots_queued_work_at_call_time():
    """e covers only a (b is launched after the record): c on aux starts when a ends, at 10, and overlaps b."""
    r = simulate(program([launch("a", "main", 10), record("e", "main"), launch("b", "main", 20),
                          wait("aux", "e"), launch("c", "aux", 5)]))
    assert times(r) == {"a": (0, 10), "b": (10, 30), "c": (10, 15)}


def test_rerecord_overwrites_but_earlier_waits_keep_their_snapshot():
    """aux waits on e while it covers a (-> c at 10); e is re-recorded after b; aux2 then waits for b (d at 30)."""
    r = simulate(program(
        [launch("a", "main", 10), record("e", "main"), wait("aux", "e"), launch("b", "main", 20),
         record("e", "main"), launch("c", "aux", 5), wait("aux2", "e"), launch("d", "aux2", 1)],
        {"main": "nonblocking", "aux": "nonblocking", "aux2": "nonblocking"}))
    assert times(r)["c"] == (10, 15)
    assert times(r)["d"] == (30, 31)


def test_wait_on_never_recorded_event_is_a_noop():
    """Nothing orders c after a: both start at 0."""
    r = simulate(program([launch("a", "main", 10), wait("aux", "never"), launch("c", "aux", 5)]))
    assert times(r) == {"a": (0, 10), "c": (0, 5)}
    assert any("never recorded" in w for w in r.warnings)


def test_record_on_idle_stream_is_complete_at_once():
    """e recorded before anything ran on main: the wait passes, c starts at 0 beside a."""
    r = simulate(program([record("e", "main"), launch("a", "main", 10), wait("aux", "e"), launch("c", "aux", 5)]))
    assert times(r)["c"] == (0, 5)


def test_wait_stream_is_record_plus_wait():
    """aux wait_stream main after a: c starts at 10; b (launched on main later) is not waited for."""
    r = simulate(program([launch("a", "main", 10), {"wait_stream": {"stream": "aux", "on": "main"}},
                          launch("b", "main", 20), launch("c", "aux", 5)]))
    assert times(r) == {"a": (0, 10), "b": (10, 30), "c": (10, 15)}


def test_legacy_default_stream_syncs_with_blocking_not_nonblocking():
    """x on blocking 0..10; y on default waits for it: 10..15; z on blocking waits for y: 15..20;
    n on a non-blocking stream ignores all of it: 0..3."""
    r = simulate(program(
        [launch("x", "blk", 10), launch("y", "legacy", 5), launch("z", "blk", 5), launch("n", "free", 3)],
        {"legacy": "default", "blk": "blocking", "free": "nonblocking"}))
    assert times(r) == {"x": (0, 10), "y": (10, 15), "z": (15, 20), "n": (0, 3)}


def test_sync_blocks_host_until_device_idle():
    """launch a costs 1 (a runs 1..11), sync returns at 11, launch b costs 1: b runs 12..14."""
    r = simulate(program([launch("a", "main", 10), {"sync": {}}, launch("b", "main", 2)], launch_us=1))
    assert times(r) == {"a": (1, 11), "b": (12, 14)}
    assert r.host_end_us == 12


def test_host_bound_eager_launches_leave_gpu_idle():
    """launch_us 5 per 1 µs kernel: kernel i is issued at 5(i+1) and runs 1 µs; the GPU idles in between."""
    r = simulate(program([launch(f"k{i}", "main", 1) for i in range(3)], launch_us=5))
    assert [times(r)[f"k{i}"] for i in range(3)] == [(5, 6), (10, 11), (15, 16)]
    assert r.streams["main"] == 3


def test_launch_onto_idle_stream_costs_the_idle_surcharge():
    """launch_us 2, idle_launch_us 3, 1 µs kernels: k0 issued at 2 onto an idle stream (host busy to 5), k1 issued
    at 5 + 2 = 7 (k0 ended at 3: idle again, host to 10), k2 at 12: kernels 2..3, 7..8, 12..13; host ends at 15."""
    r = simulate(program([launch(f"k{i}", "main", 1) for i in range(3)], launch_us=2, idle_launch_us=3))
    assert [times(r)[f"k{i}"] for i in range(3)] == [(2, 3), (7, 8), (12, 13)]
    assert r.host_end_us == 15


def test_launch_behind_queued_work_pays_no_idle_surcharge():
    """As above with a 10 µs k0: k0 2..12 (surcharge, host to 5); k1 issued at 7 while k0 runs (no surcharge)
    runs 12..13; k2 issued at 9 behind k1 runs 13..14; host ends at 9."""
    r = simulate(program([launch("k0", "main", 10), launch("k1", "main", 1), launch("k2", "main", 1)],
                         launch_us=2, idle_launch_us=3))
    assert times(r) == {"k0": (2, 12), "k1": (12, 13), "k2": (13, 14)}
    assert r.host_end_us == 9


def test_graph_replays_pay_no_idle_surcharge():
    """A replay's kernel nodes are not eager launches: a captured 1 µs kernel replayed twice (replay_us 2) runs
    2..3 and 4..5 whatever idle_launch_us says."""
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}}, launch("a", "main", 1),
           {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}, {"replay": {"graph": "g"}}]
    r = simulate(program(ops, replay_us=2, idle_launch_us=50))
    assert [(k.start_us, k.end_us) for k in r.kernels] == [(2, 3), (4, 5)]


def test_records_and_waits_cost_host_time_before_the_next_launch():
    """a issued at 2; record (1) and wait (1) delay the launch of c (2) on aux to 2+1+1+2 = 6; a ends at 12."""
    r = simulate(program([launch("a", "main", 10), record("e", "main"), wait("aux", "e"), launch("c", "aux", 1)],
                         launch_us=2, record_us=1, wait_us=1))
    assert times(r) == {"a": (2, 12), "c": (12, 13)}
    assert [(s.label, s.start_us, s.end_us) for s in r.host_spans] == [
        ("launch a", 0, 2), ("record", 2, 3), ("wait", 3, 4), ("launch c", 4, 6)]


def test_per_op_host_us_overrides_global_cost():
    r = simulate(program([launch("a", "main", 1, host_us=7), launch("b", "aux", 1)], launch_us=2))
    assert times(r) == {"a": (7, 8), "b": (9, 10)}


def test_two_bandwidth_bound_kernels_each_take_twice_as_long():
    """bw 1.0 each: rates 1/2, both 10 µs kernels end at 20."""
    r = simulate(program([launch("a", "main", 10, bw=1.0), launch("b", "aux", 10, bw=1.0)]))
    assert times(r) == {"a": (0, 20), "b": (0, 20)}


def test_demands_below_capacity_run_at_full_speed():
    r = simulate(program([launch("a", "main", 10, bw=0.5, sm=0.5), launch("b", "aux", 10, bw=0.4, sm=0.5)]))
    assert times(r) == {"a": (0, 10), "b": (0, 10)}


def test_rates_are_resolved_when_a_kernel_ends():
    """Both at rate 1/2 until b (5 µs of work) ends at 10; a then has 5 µs left at rate 1: ends at 15."""
    r = simulate(program([launch("a", "main", 10, bw=1.0), launch("b", "aux", 5, bw=1.0)]))
    assert times(r) == {"a": (0, 15), "b": (0, 10)}


def test_full_grid_kernel_leaves_no_room():
    """sm 1.0 + sm 0.5: level L with 1.5 L = 1 -> L = 2/3; b (4 µs) ends at 6, a has 6 left -> 6 + 6 = 12."""
    r = simulate(program([launch("a", "main", 10, sm=1.0, bw=0.0), launch("b", "aux", 4, sm=0.5, bw=0.0)]))
    assert times(r)["b"] == pytest.approx((0, 6))
    assert times(r)["a"] == pytest.approx((0, 12))


def test_overlap_penalty_slows_concurrent_kernels_only():
    """Capacity 0.8 while two run: demands 0.5+0.5 = 1 > 0.8 -> rates 0.8 each; 8 µs kernels end at 10."""
    sharing = FluidSharing(overlap_penalty=0.2)
    r = simulate(program([launch("a", "main", 8, bw=0.5), launch("b", "aux", 8, bw=0.5)]), sharing)
    assert times(r)["a"] == pytest.approx((0, 10))
    alone = simulate(program([launch("a", "main", 8, bw=0.5)]), sharing)
    assert times(alone)["a"] == (0, 8)


def test_kernel_gap_delays_each_eager_kernel():
    r = simulate(program([launch("a", "main", 10), launch("b", "main", 5)], kernel_gap_us=2))
    assert times(r) == {"a": (2, 12), "b": (14, 19)}


def test_a_launch_of_several_kernels_waits_one_gap_per_kernel():
    """a stands for 3 kernels (10 µs in all), b for 1. Eager, gap 2: a 6..16 (three gaps), b 18..23. In a
    replay (host 2, node gap 1): a 5..15, b 16..21."""
    eager = simulate(program([launch("a", "main", 10, kernels=3), launch("b", "main", 5)], kernel_gap_us=2))
    assert times(eager) == {"a": (6, 16), "b": (18, 23)}
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}}, launch("a", "main", 10, kernels=3),
           launch("b", "main", 5), {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}]
    assert times(simulate(program(ops, replay_us=2, node_gap_us=1))) == {"a": (5, 15), "b": (16, 21)}


def test_replay_issues_captured_dag_at_once_with_node_gaps():
    """Capture a; fork b on aux; join; c. Replay 1 (host 2): a 3..13, b 14..19, c 20..22. Replay 2 issued at
    4: a 23..33, b 34..39, c 40..42. Capture itself runs nothing."""
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}},
           launch("a", "main", 10), record("f", "main"), wait("aux", "f"), launch("b", "aux", 5),
           record("j", "aux"), wait("main", "j"), launch("c", "main", 2),
           {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}, {"replay": {"graph": "g"}}]
    r = simulate(program(ops, launch_us=100, record_us=100, wait_us=100, replay_us=2, node_gap_us=1))
    got = [(k.name, k.start_us, k.end_us, k.replay) for k in r.kernels]
    assert got == [("a", 3, 13, 1), ("b", 14, 19, 1), ("c", 20, 22, 1),
                   ("a", 23, 33, 2), ("b", 34, 39, 2), ("c", 40, 42, 2)]


def test_cross_stream_edges_in_a_replay_add_the_node_join_gap():
    """As above with node_join_gap 3: b follows a wait on main's event (+3), c a wait on aux's (+3); a does
    not. Replay 1 (host 2): a 3..13, b 17..22, c 26..28."""
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}},
           launch("a", "main", 10), record("f", "main"), wait("aux", "f"), launch("b", "aux", 5),
           record("j", "aux"), wait("main", "j"), launch("c", "main", 2),
           {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}]
    r = simulate(program(ops, replay_us=2, node_gap_us=1, node_join_gap_us=3, join_gap_us=50))
    assert times(r) == {"a": (3, 13), "b": (17, 22), "c": (26, 28)}


def test_first_fork_of_each_replay_delays_both_streams_once():
    """As above with a kernel d (4 µs) on main between fork and join, and first_fork_gap 5. Replay 1 (host 2):
    a 3..13; the fork (aux waits main's f) is the replay's first cross-stream edge: b 13 + 1 + 3 + 5 = 22..27,
    main's next kernel d 13 + 1 + 5 = 19..23; the join is not the first edge: c max(27, 23) + 1 + 3 = 31..33.
    Replay 2 pays it again: a 34..44, d 50..54, b 53..58, c 62..64."""
    ops = [{"capture_begin": {"graph": "g", "stream": "main"}},
           launch("a", "main", 10), record("f", "main"), wait("aux", "f"), launch("b", "aux", 5),
           launch("d", "main", 4), record("j", "aux"), wait("main", "j"), launch("c", "main", 2),
           {"capture_end": {"graph": "g"}}, {"replay": {"graph": "g"}}, {"replay": {"graph": "g"}}]
    r = simulate(program(ops, replay_us=2, node_gap_us=1, node_join_gap_us=3, first_fork_gap_us=5))
    got = [(k.name, k.start_us, k.end_us, k.replay) for k in r.kernels]
    assert sorted(got, key=lambda k: (k[3], k[1])) == [
        ("a", 3, 13, 1), ("d", 19, 23, 1), ("b", 22, 27, 1), ("c", 31, 33, 1),
        ("a", 34, 44, 2), ("d", 50, 54, 2), ("b", 53, 58, 2), ("c", 62, 64, 2)]


def test_first_fork_gap_leaves_eager_forks_alone():
    """Eager (no replay), first_fork_gap 50: the timeline of the test below, unchanged."""
    r = simulate(program([launch("a", "main", 10), record("e", "main"), wait("aux", "e"), launch("b", "aux", 5),
                          launch("c", "aux", 1), launch("d", "main", 1)], join_gap_us=2, first_fork_gap_us=50))
    assert times(r) == {"a": (0, 10), "b": (12, 17), "c": (17, 18), "d": (10, 11)}


def test_eager_cross_stream_wait_adds_the_join_gap_once():
    """Eager, no host costs, join gap 2: a 0..10 on main; aux waits a's event: b starts 10 + 2, c behind b on
    aux waits nothing new (12..17..18); d on main waits nothing (10..11)."""
    r = simulate(program([launch("a", "main", 10), record("e", "main"), wait("aux", "e"), launch("b", "aux", 5),
                          launch("c", "aux", 1), launch("d", "main", 1)], join_gap_us=2, node_join_gap_us=40))
    assert times(r) == {"a": (0, 10), "b": (12, 17), "c": (17, 18), "d": (10, 11)}


def test_queue_depth_blocks_the_host():
    """Depth 1: c can only be issued once b starts (at 10), so the host ends at 10."""
    r = simulate(program([launch("a", "main", 10), launch("b", "main", 10), launch("c", "main", 10)],
                         queue_depth=1))
    assert r.host_end_us == 10
    assert times(r)["c"] == (20, 30)


def test_zero_duration_kernels_in_a_long_chain():
    r = simulate(program([launch(f"z{i}", "main", 0) for i in range(5000)] + [launch("last", "main", 1)]))
    assert r.makespan_us == 1
    assert len(r.kernels) == 5001


def test_sharing_model_must_give_one_rate_per_running_kernel():
    """A custom model that drops a kernel's rate is a bug in the model: the engine says so."""

    class DropsOne:
        def rates(self, demands):
            return [1.0] * (len(demands) - 1) if len(demands) > 1 else [1.0]

    with pytest.raises(ValueError, match="gave 1 rates for 2 running kernels"):
        simulate(program([launch("a", "main", 10), launch("b", "aux", 10)]), DropsOne())
