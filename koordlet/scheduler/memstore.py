"""An in-memory store with the informer's reading and handler interface, for tests, benchmarks and
plugin authors' own tests: :meth:`MemoryStore.put` and :meth:`MemoryStore.remove` notify handlers at
once, on the caller's thread, exactly as an informer would on its watch thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from koordlet.cluster.informer import EventHandler, IndexFunc, object_key

Obj = Mapping[str, Any]


class MemoryStore:
    """A synced cache of objects keyed like an informer's (``namespace/name`` or ``name``)."""

    def __init__(
        self,
        objects: Iterable[Obj] = (),
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._handlers: list[EventHandler] = []
        self._transform = transform
        for obj in objects:
            self.put(obj)

    def has_synced(self) -> bool:
        return True

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def objects(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> list[Obj]:
        with self._lock:
            return [self._items[k] for k in self._indices[index].get(value, ())]

    def __len__(self) -> int:
        return len(self._items)

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)
        if handler.on_add is not None:
            for obj in self.objects():
                handler.on_add(obj)

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, fn in self._indexers.items():
            idx = self._indices[name]
            for value in fn(old) if old is not None else ():
                idx.get(value, set()).discard(key)
            for value in fn(new) if new is not None else ():
                idx.setdefault(value, set()).add(key)

    def put(self, obj: Obj) -> Obj:
        """Add or replace ``obj``; handlers see an add or an update. Returns the stored object."""
        if self._transform is not None:
            obj = self._transform(obj)
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            self._reindex(key, old, obj)
        for h in self._handlers:
            if old is None and h.on_add is not None:
                h.on_add(obj)
            elif old is not None and h.on_update is not None:
                h.on_update(old, obj)
        return obj

    def remove(self, key: str) -> Obj | None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._reindex(key, old, None)
        if old is not None:
            for h in self._handlers:
                if h.on_delete is not None:
                    h.on_delete(old)
        return old

    def put_all(self, objs: Sequence[Obj]) -> None:
        for obj in objs:
            self.put(obj)
