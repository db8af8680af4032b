"""Per-resource write history: watch resumption, consistent list snapshots, 410 Gone past the window.

kube-apiserver keeps one watch cache per resource (``storage/cacher``), so the window a watch can resume
from is that resource's own: churn on pods does not expire a quiet ConfigMap watch. Each resource here
keeps its last ``limit`` writes; a resourceVersion older than the newest write that fell out of that
window (or than the last :meth:`History.compact`, etcd's compaction) is too old. The same window lets a
paged list answer later pages as of the first page's revision (etcd reads at a revision): the current
objects with the newer writes undone.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from tests.apiserver import status
from tests.apiserver.watch import WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]


class History:
    """Bounded write history per storage key (not thread-safe: the store calls it under its lock)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("history_limit must be at least 1")
        self.limit = limit
        self._events: dict[Key, deque[WatchEvent]] = {}
        self._dropped: dict[Key, int] = {}  # newest revision that fell out of each window
        self._compacted = 0

    def record(self, event: WatchEvent) -> None:
        window = self._events.setdefault(event.key, deque())
        window.append(event)
        if len(window) > self.limit:
            self._dropped[event.key] = window.popleft().rv

    def floor(self, key: Key) -> int:
        """The oldest revision of ``key`` that can still be resumed from or read at."""
        return max(self._dropped.get(key, 0), self._compacted)

    def since(self, key: Key, rv: int, current: int) -> Iterator[WatchEvent]:
        """Writes of ``key`` newer than ``rv``; 410 Gone if some of them are no longer kept."""
        self.check(key, rv, current)
        return (ev for ev in list(self._events.get(key, ())) if ev.rv > rv)

    def check(self, key: Key, rv: int, current: int) -> None:
        floor = self.floor(key)
        if rv < current and rv < floor:
            raise status.gone(rv, floor)

    def snapshot(self, key: Key, objects: Mapping[tuple[str, str], Obj], rv: int, current: int) -> list[Obj]:
        """The objects of ``key`` as they were at revision ``rv`` (410 if that is out of the window)."""
        if rv > current:
            raise status.APIError(504, f"Too large resource version: {rv}, current: {current}")
        self.check(key, rv, current)
        state = {k: copy.deepcopy(v) for k, v in objects.items()}
        for ev in reversed(self._events.get(key, ())):
            if ev.rv <= rv:
                break
            meta = ev.obj["metadata"]
            at = (meta.get("namespace", ""), meta["name"])
            if ev.old is None:
                state.pop(at, None)
            else:
                state[at] = copy.deepcopy(ev.old)
        return [state[k] for k in sorted(state)]

    def compact(self, rv: int) -> None:
        """Forget everything up to ``rv`` (etcd compaction): older versions now get 410 Gone."""
        self._compacted = rv
        self._events.clear()
