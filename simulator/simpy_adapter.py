"""The engine's one door into SimPy's internals (SimPy 4: hence ``simpy < 5`` in pyproject;
``tests/test_simpy_adapter.py`` pins every behaviour relied on here).

``Environment.schedule`` pushes ``(now + delay, priority, next(_eid), event)`` onto the heap ``_queue``;
``Environment.step`` pops the smallest entry, sets ``now`` to its time and calls the event's ``callbacks``. The
engine needs three things the public API does not give:

- an event at an exact time: ``now + delay`` cannot always land on a time the host reached by adding its
  costs up from an earlier time;
- an id taken before the event is pushed: events at the same time run in id order, so an event that takes
  its id when SimPy's own timeout would have been created runs in that timeout's place, even when it is pushed
  later (a kernel's completion waits until the end of the callback that changed its rate, and is pushed once);
- events made without ``Event.__init__`` (a third of a timeout's cost), sharing one list of callbacks:
  ``step`` only reads an event's ``callbacks`` (replacing them with None, not emptying the list) and ``_ok``.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.events import NORMAL, Event

_INFINITY = float("inf")
_new = object.__new__


class Due(Event):
    """An event pushed by :meth:`Scheduler.push`: it fires at ``at`` (``now`` while its callbacks run) and
    carries ``payload`` for them."""

    __slots__ = ("at", "payload")
    _ok = True  # what ``Environment.step`` checks after the callbacks: this event never fails


class Scheduler:
    """A SimPy environment's event queue, clock and event ids, as the engine uses them."""

    __slots__ = ("_ids", "_queue", "env", "new_id")

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self._queue = self.env._queue
        self._ids = self.env._eid
        # the id SimPy's next own event would take (once taken, it is not given again)
        self.new_id: Callable[[], int] = self._ids.__next__

    def push(self, at: float, event_id: int, callbacks: list[Callable[[Any], None]], payload: object) -> Due:
        """Queue an event at exactly ``at`` with an id taken earlier (:attr:`new_id`); its ``callbacks`` list may
        be shared with other events (SimPy drops the reference once they ran, without emptying the list)."""
        event = _new(Due)
        event.callbacks = callbacks
        event.at = at
        event.payload = payload
        heappush(self._queue, (at, NORMAL, event_id, event))
        return event

    def schedule(self, at: float, callbacks: list[Callable[[Any], None]], payload: object) -> None:
        """:meth:`push` with the next id."""
        event = _new(Due)
        event.callbacks = callbacks
        event.at = at
        event.payload = payload
        heappush(self._queue, (at, NORMAL, next(self._ids), event))

    def next_time(self) -> float:
        """The time of the next queued event (infinity if none)."""
        queue = self._queue
        return queue[0][0] if queue else _INFINITY

    def run(self) -> None:
        """Run the queued events, and those their callbacks queue, until none is left: ``Environment.run``'s
        loop for events that never fail (``Environment.step`` without its failure and interrupt handling)."""
        env = self.env
        queue = self._queue
        while queue:
            env._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
