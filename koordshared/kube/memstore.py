"""An informer fed by hand instead of by list+watch, for tests, benchmarks and plugin authors' own tests:
the same cache, indexes, transform and handler dispatch as :class:`~koordshared.kube.informer.Informer`,
with :meth:`MemoryStore.put` and :meth:`MemoryStore.remove` in place of watch events (handlers run at once,
on the caller's thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordshared.kube.informer import IndexFunc, Informer

Obj = Mapping[str, Any]


def _no_list(**_: Any) -> Any:
    raise RuntimeError("a MemoryStore is fed with put()/remove(), it does not list")


class MemoryStore(Informer):
    """Synced from the start (with ``objects``, transformed, as its first list)."""

    def __init__(
        self,
        objects: Iterable[Obj] = (),
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        name: str = "memory",
    ) -> None:
        super().__init__(name, _no_list, indexers=indexers, transform=transform)
        self._replace([self._trim(o) for o in objects])

    def _trim(self, obj: Obj) -> Obj:
        return obj if self._transform is None else self._transform(obj)

    def put(self, obj: Obj) -> Obj:
        """Add or replace ``obj`` (an ADDED or MODIFIED event); returns the stored object."""
        obj = self._trim(obj)
        self._apply("MODIFIED", obj)
        return obj

    def remove(self, key: str) -> Obj | None:
        """Delete the object under ``key`` (a DELETED event); returns it, or ``None`` if absent."""
        old = self.get(key)
        if old is not None:
            self._apply("DELETED", old)
        return old
