"""What the migration controller knows of its PodMigrationJobs and Reservations: the watch cache, with
what the controller itself wrote laid over it until the cache has caught up (Koordinator's assumed
cache). Without the overlay a job created a moment ago would not count against the limits of the next
decision, and a job updated a moment ago would be worked on again from its older copy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from koord.descheduler.framework.interface import Obj, Store
from koordshared.apis.core.pod import as_map


def _version(obj: Obj | None) -> int:
    try:
        return int(str(as_map(obj, "metadata").get("resourceVersion") or "0"))
    except ValueError:
        return 0


def _name(obj: Obj) -> str:
    return str(as_map(obj, "metadata").get("name") or "")


class Overlay:
    """A cache of one cluster-scoped resource and the writes not yet seen in it, by name."""

    def __init__(self, store: Callable[[], Store | None]) -> None:
        self._store = store
        """The watch cache (``None`` when there is none: offline, only the writes are known)."""
        self._written: dict[str, Obj] = {}
        self._deleted: dict[str, int] = {}
        """Names deleted by us, with the version the cache held then (hidden until the cache drops it)."""
        self._writes = 0

    def _cached(self, name: str) -> Obj | None:
        store = self._store()
        return store.get(name) if store is not None else None

    def get(self, name: str) -> Obj | None:
        cached = self._cached(name)
        if name in self._deleted:
            if cached is None or _version(cached) > self._deleted[name]:
                del self._deleted[name]
            else:
                return None
        written = self._written.get(name)
        if written is None:
            return cached
        if cached is not None and _version(cached) >= _version(written):
            del self._written[name]
            return cached
        return written

    def objects(self) -> list[Obj]:
        store = self._store()
        names = {_name(o) for o in store.objects()} if store is not None else set()
        names |= set(self._written)
        return [o for n in sorted(names) if (o := self.get(n)) is not None]

    def stamp(self) -> tuple[object, ...]:
        """Changes whenever what :meth:`objects` returns may have changed (for indexes built on it)."""
        store = self._store()
        seen = (getattr(store, "resource_version", None), len(store)) if store is not None else ()
        return (*seen, self._writes)

    def wrote(self, obj: Mapping[str, Any]) -> None:
        """``obj`` as the server answered a create or update."""
        self._writes += 1
        self._deleted.pop(_name(obj), None)
        self._written[_name(obj)] = obj

    def deleted(self, name: str) -> None:
        self._writes += 1
        self._written.pop(name, None)
        cached = self._cached(name)
        self._deleted[name] = _version(cached) if cached is not None else 0
