"""What the engine relies on in SimPy's internals (simulator/simpy_adapter.py), pinned against SimPy itself: a
SimPy upgrade that changes any of it fails here, not as a silently different timeline."""

from __future__ import annotations

import simpy

from simulator.simpy_adapter import Due, Scheduler


def _log(fired: list[tuple[float, object]], scheduler: Scheduler):
    def callback(event: Due) -> None:
        assert scheduler.env.now == event.at  # SimPy's clock is the event's exact time
        fired.append((event.at, event.payload))
    return callback


def test_ids_are_the_ones_simpy_would_give_its_own_events():
    scheduler = Scheduler()
    taken = scheduler.new_id()
    scheduler.env.timeout(1.0)
    [(_, _, timeout_id, _)] = scheduler.env._queue
    assert timeout_id == taken + 1


def test_events_at_one_time_run_in_id_order_even_when_pushed_later():
    """An id taken before a SimPy timeout's (and before another event's) runs first, though pushed last."""
    scheduler = Scheduler()
    fired: list[tuple[float, object]] = []
    callbacks = [_log(fired, scheduler)]
    early = scheduler.new_id()
    scheduler.env.timeout(2.0).callbacks.append(lambda _event: fired.append((2.0, "simpy timeout")))
    scheduler.schedule(2.0, callbacks, "late")
    scheduler.push(2.0, early, callbacks, "early")
    scheduler.run()
    assert fired == [(2.0, "early"), (2.0, "simpy timeout"), (2.0, "late")]


def test_events_fire_at_exact_times_and_share_one_list_of_callbacks():
    """0.1 + 0.2 is not 0.3: SimPy's now + delay from 0.1 could not land on the time pushed; the shared list
    of callbacks is not emptied by running one event."""
    scheduler = Scheduler()
    fired: list[tuple[float, object]] = []
    callbacks = [_log(fired, scheduler)]
    scheduler.schedule(0.1 + 0.2, callbacks, "b")
    scheduler.schedule(0.1, callbacks, "a")
    scheduler.run()
    assert fired == [(0.1, "a"), (0.1 + 0.2, "b")] and len(callbacks) == 1


def test_next_time_sees_every_queued_event():
    scheduler = Scheduler()
    assert scheduler.next_time() == float("inf")
    scheduler.schedule(5.0, [], None)
    scheduler.env.timeout(3.0)
    assert scheduler.next_time() == 3.0


def _chain(run_with_simpy: bool) -> list[tuple[float, object]]:
    """Events that queue events from their callbacks, at equal and different times, with SimPy's timeouts."""
    scheduler = Scheduler()
    fired: list[tuple[float, object]] = []
    log = _log(fired, scheduler)

    def spawn(event: Due) -> None:
        log(event)
        if event.payload < 6:
            scheduler.schedule(event.at + event.payload % 2, callbacks, event.payload + 2)
            scheduler.env.timeout(0.5).callbacks.append(lambda _e: fired.append((scheduler.env.now, "timeout")))

    callbacks = [spawn]
    scheduler.schedule(0.0, callbacks, 0)
    scheduler.schedule(0.0, callbacks, 1)
    if run_with_simpy:
        scheduler.env.run()
    else:
        scheduler.run()
    return fired


def test_the_adapters_loop_runs_events_as_simpy_does():
    """``Environment.step`` takes the events as they are (no ``Event.__init__``: it reads only ``callbacks``
    and ``_ok``), and ``Scheduler.run`` runs them in its order with its clock."""
    assert issubclass(Due, simpy.Event)
    assert _chain(run_with_simpy=False) == _chain(run_with_simpy=True)
    assert len(_chain(run_with_simpy=False)) == 14  # 8 events and 6 timeouts
