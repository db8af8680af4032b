"""A plugin controller driven by keys (client-go's work queue on the framework's periodic ``sync``):
informer handlers queue keys, each ``sync`` reconciles the keys due, once each however often they were
queued. A reconcile may ask for another look after some seconds; one that raises is retried after a
backoff doubling from 0.5 s to 30 s. Time is the handle's clock, so tests move it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

RETRY_BASE = 0.5
RETRY_MAX = 30.0


class KeyedController:
    name = ""
    period = 0.25
    """Seconds between syncs: reports and status follow within about this long."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._due: dict[str, float] = {}
        self._failures: dict[str, int] = {}

    def enqueue(self, key: str, after: float = 0.0) -> None:
        due = self._clock() + after
        with self._lock:
            self._due[key] = min(self._due.get(key, due), due)

    def sync(self) -> None:
        now = self._clock()
        with self._lock:
            keys = [k for k, due in self._due.items() if due <= now]
            for k in keys:
                del self._due[k]
        for key in keys:
            try:
                again = self.reconcile(key)
            except Exception as err:
                with self._lock:
                    n = self._failures[key] = self._failures.get(key, 0) + 1
                delay = min(RETRY_BASE * 2 ** (n - 1), RETRY_MAX)
                log.warning("%s: %s failed (%s); again in %.1fs", self.name, key, err, delay)
                self.enqueue(key, delay)
                continue
            with self._lock:
                self._failures.pop(key, None)
            if again is not None:
                self.enqueue(key, again)

    def reconcile(self, key: str) -> float | None:
        """Bring ``key`` up to date; seconds after which to look again, or ``None``."""
        raise NotImplementedError
