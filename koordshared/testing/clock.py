"""A controllable clock for tests (koordlet's ``clock.NewFakeClock``): monotonic and wall time together."""

from __future__ import annotations

import threading


class FakeClock:
    """``clock()`` returns monotonic seconds; ``wall()`` epoch seconds; ``advance(s)`` moves both."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._lock = threading.Lock()
        self._now = start
        self._wall = wall_start

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def wall(self) -> float:
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> FakeClock:
        with self._lock:
            self._now += seconds
            self._wall += seconds
        return self
