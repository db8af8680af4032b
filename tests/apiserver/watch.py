"""Watch subscriptions of the test API server: one queue per open watch, filtered as the watch cache does.

The store offers every write (a :class:`WatchEvent`) to every :class:`Watcher`; the watcher keeps the
events of its resource, namespace and selector. ``None`` in the queue means the store closed the watch.
"""

from __future__ import annotations

import copy
import dataclasses
import queue
import time
from collections.abc import Callable
from typing import Any

from tests.apiserver.events import from_storage
from tests.apiserver.resources import ResourceType
from tests.apiserver.selectors import Selector

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class WatchEvent:
    """One write as history keeps it: ``old`` is the object before (None for ADDED)."""

    rv: int
    key: tuple[str, str]
    type: str
    obj: Obj
    old: Obj | None


class WatchClosed(Exception):
    """The store closed this watcher (server stopping or going down)."""


class Watcher:
    """A subscription to one resource's writes, filtered by namespace and selector.

    A MODIFIED event that moves an object into the selector is delivered as ADDED and one that moves it
    out as DELETED, as kube-apiserver's watch cache does.
    """

    def __init__(
        self,
        rt: ResourceType,
        namespace: str | None,
        selector: Selector,
        rv: int,
        on_close: Callable[[Watcher], None],
    ) -> None:
        self._on_close = on_close
        self._rt = rt
        self._namespace = namespace
        self._selector = selector
        self._queue: queue.Queue[WatchEvent | None] = queue.Queue()
        self.last_rv = rv  # the newest revision this watcher has passed on or skipped (for BOOKMARKs)

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self._namespace is not None and obj["metadata"].get("namespace") != self._namespace:
            return False
        return self._selector.matches(obj)

    def offer(self, event: WatchEvent | None) -> None:
        self._queue.put(event)

    def next(self, timeout: float) -> tuple[str, Obj] | None:
        """The next matching ``(type, object)``, or None when ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                ev = self._queue.get(timeout=left)
            except queue.Empty:
                return None
            if ev is None:
                raise WatchClosed
            self.last_rv = max(self.last_rv, ev.rv)
            if ev.key != self._rt.key:
                continue
            now, before = self._matches(ev.obj), self._matches(ev.old)
            typ = None
            if ev.type == "DELETED":
                typ = "DELETED" if before or now else None
            elif now:
                typ = "MODIFIED" if before else "ADDED"
            elif before:
                typ = "DELETED"
            if typ is not None:
                return typ, from_storage(self._rt, copy.deepcopy(ev.obj))

    def close(self) -> None:
        self._on_close(self)
