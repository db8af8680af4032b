"""Token bucket and exponential backoff on an injected clock (Go's ``rate.Limiter`` and ``wait.Backoff``).

Shared by the agent (PLEG-triggered pod refreshes 5/s burst 10, NodeMetric status writes 0.1/s burst 2)
and the cluster side (list+watch and leader-election retries), so a flapping API server never turns into
a request storm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


class TokenBucket:
    """``rate`` tokens per second up to ``burst``; starts full."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"need rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def _fill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + max(now - self._last, 0.0) * self.rate)
        self._last = now

    def allow(self) -> bool:
        """Take a token if one is there."""
        with self._lock:
            self._fill()
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def reserve(self) -> float:
        """Take a token now, owed if none is there (the count goes below zero); the seconds to wait
        before using it (Go's ``rate.Limiter.Reserve``): concurrent callers queue in turn, each
        waiting for its own token."""
        with self._lock:
            self._fill()
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0.0 else -self._tokens / self.rate

    def wait_time(self) -> float:
        """Seconds until a token will be there (0 if one is)."""
        with self._lock:
            self._fill()
            return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.rate


@dataclass
class Backoff:
    """Exponential delays ``initial * factor**n`` capped at ``cap``; :meth:`reset` after a success."""

    initial: float = 0.5
    factor: float = 2.0
    cap: float = 30.0
    _next: float = 0.0

    def next(self) -> float:
        delay = self._next or self.initial
        self._next = min(delay * self.factor, self.cap)
        return min(delay, self.cap)

    def reset(self) -> None:
        self._next = 0.0
