"""Waiting on a condition in tests and benchmarks of real processes: poll until true or a deadline.

Never a fixed "settle" sleep: the wait ends as soon as the condition holds, and its result says whether
it did and how long that took, so a test can assert on both (``w = wait_until(...); assert w, ...;
assert w.seconds < 1.0``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Waited:
    """The outcome of :func:`wait_until`: true when the condition held in time."""

    met: bool
    seconds: float
    """How long the wait took (up to the timeout when the condition never held)."""

    def __bool__(self) -> bool:
        return self.met


def wait_until(condition: Callable[[], object], timeout: float, *, step: float = 0.01) -> Waited:
    """Poll ``condition()`` every ``step`` seconds until it is truthy or ``timeout`` seconds pass."""
    start = time.monotonic()
    while True:
        if condition():
            return Waited(True, time.monotonic() - start)
        elapsed = time.monotonic() - start
        if elapsed >= timeout:
            return Waited(False, elapsed)
        time.sleep(step)
