"""In-process events between components (``api.EVENT_*``): the sampler tells plugins a node sample is in.

Publishers call subscribers on their own thread, so a subscriber must be short; a raising one is isolated.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from koordshared.runtime.lifecycle import TickErrorHook

log = logging.getLogger(__name__)


class EventBus:
    """Named in-process events (``api.EVENT_*``): publishers call subscribers on their own thread.

    A raising subscriber is logged and reported to ``on_error`` and does not affect the publisher or the
    other subscribers, so a plugin's bug cannot stall the sampler that publishes node samples.
    """

    def __init__(self, on_error: TickErrorHook | None = None) -> None:
        self._lock = threading.Lock()
        self._subs: dict[str, list[tuple[str, Callable[[], None]]]] = {}
        self._on_error = on_error

    def subscribe(self, event: str, fn: Callable[[], None], *, owner: str = "") -> None:
        with self._lock:
            self._subs.setdefault(event, []).append((owner, fn))

    def unsubscribe_owner(self, owner: str) -> None:
        with self._lock:
            for event, subs in self._subs.items():
                self._subs[event] = [(o, f) for o, f in subs if o != owner]

    def publish(self, event: str) -> None:
        with self._lock:
            subs = list(self._subs.get(event, ()))
        for owner, fn in subs:
            try:
                fn()
            except Exception as err:
                log.exception("subscriber %s of %s failed", owner or "?", event)
                if self._on_error is not None:
                    self._on_error(owner or event, err)
