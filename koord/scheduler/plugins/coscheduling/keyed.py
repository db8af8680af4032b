"""The half of a controller a plugin owns: keys queued from informer handlers, handed to the scheduler's
work queue once it binds one (keys queued before are kept, once each)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class KeyedController:
    name = ""
    workers = 1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enqueue: Callable[[str], None] | None = None
        self._early: dict[str, None] = {}

    def bind(self, enqueue: Callable[[str], None]) -> None:
        with self._lock:
            self._enqueue = enqueue
            early, self._early = list(self._early), {}
        for key in early:
            enqueue(key)

    def enqueue(self, key: str) -> None:
        with self._lock:
            target = self._enqueue
            if target is None:
                self._early[key] = None
                return
        target(key)
