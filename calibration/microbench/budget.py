"""Wall-clock budget of a run, split into stage deadlines (pure; the clock is injectable for tests)."""

from __future__ import annotations

import time
from collections.abc import Callable


class Budget:
    """A total of ``seconds`` from construction; ``stage(frac)`` opens a stage that must end by ``frac`` of
    the total (time a stage leaves unused passes to the next). ``skipped`` counts cut items per stage."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds <= 0:
            raise ValueError("budget must be positive")
        self._clock = clock
        self.start = clock()
        self.total = seconds
        self.deadline = self.start + seconds
        self.skipped: dict[str, int] = {}

    def stage(self, frac: float) -> None:
        self.deadline = self.start + self.total * min(1.0, frac)

    def elapsed(self) -> float:
        return self._clock() - self.start

    def left(self) -> float:
        return self.deadline - self._clock()

    def expired(self) -> bool:
        return self.left() <= 0

    def skip(self, stage: str, count: int) -> None:
        if count > 0:
            self.skipped[stage] = self.skipped.get(stage, 0) + count

    def notes(self) -> list[str]:
        return [f"budget of {self.total:.0f} s reached: skipped {n} {stage} item(s)"
                for stage, n in self.skipped.items()]
