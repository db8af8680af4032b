"""A rate-limited work queue of keys (client-go's ``workqueue``): the spine of every controller.

Semantics that controllers rely on: a key queued several times before a worker takes it is processed
once (dedup); a key is never processed by two workers at once (a key added while it is processed is
queued again when :meth:`done` is called); :meth:`add_rate_limited` retries a failing key after a
per-key exponential delay (``base * 2**failures`` up to ``max_delay``) and :meth:`forget` resets it after
a success. Delayed keys need no timer thread: :meth:`get` waits until the earliest one is due.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque


class WorkQueue:
    def __init__(
        self,
        name: str = "",
        *,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
    ) -> None:
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._failures: dict[str, int] = {}
        self._shutdown = False
        self.adds = 0

    def __len__(self) -> int:
        """Keys waiting to be processed now (delayed keys not counted)."""
        with self._cond:
            return len(self._queue)

    def idle(self) -> bool:
        """Nothing queued now and nothing being processed (delayed keys aside)."""
        with self._cond:
            return not self._queue and not self._processing

    def _add(self, key: str) -> None:
        self.adds += 1
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add(self, key: str) -> None:
        with self._cond:
            self._add(key)

    def add_all(self, keys: list[str]) -> None:
        with self._cond:
            for key in keys:
                self._add(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: str) -> float:
        """Queue ``key`` again after its backoff; returns the delay chosen."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay = min(self.base_delay * (2.0**n), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def _promote_due(self) -> float | None:
        """Move due delayed keys to the queue; seconds until the next one (None: none left)."""
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> str | None:
        """The next key (mark it processing; call :meth:`done` after), or ``None`` on shut-down/timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                next_due = self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                wait = next_due
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shut_down(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutdown
