"""The object store behind the test API server: resourceVersions, history, watchers, write rules.

Every write takes the next value of one global counter as its ``resourceVersion`` (etcd's revision), is
kept in its resource's bounded history (:mod:`tests.apiserver.history`) and is offered to watchers. Writes
go through the type's strategy (:mod:`tests.apiserver.strategy`: defaults, what create/update may set,
validation) and the generic registry rules: server-set ``uid``, ``creationTimestamp`` and ``generation``
(bumped when anything but metadata and status changes), ``metadata.uid``/``resourceVersion``
preconditions (409), graceful deletion and finalizers (:mod:`tests.apiserver.deletion`), dry run.

Tests may call :class:`Store` directly to seed or change objects; those writes are seen by watchers
exactly like API writes and obey the same rules, except that ``create`` keeps the given ``.status`` unless
told otherwise (``keep_status``) and no admission runs (namespaces need not exist, no priority is
resolved). Objects are kept in their storage shape (Events as core ``v1``); reads and watches through a
type present them in its shape (:mod:`tests.apiserver.events`).
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.apiserver import events, paging, status
from tests.apiserver.history import History
from tests.apiserver.resources import CRD_KEY, Registry, ResourceType, crd_written
from tests.apiserver.selectors import Selector
from tests.apiserver.watch import Watcher, WatchEvent
from tests.apiserver.writes import Writes

Obj = dict[str, Any]
Listener = Callable[[WatchEvent], None]


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """One answer to a list: items, the revision they are consistent at, and where the next page starts."""

    items: list[Obj]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


class Store(Writes):
    """Objects of every served resource, keyed by storage key then (namespace, name)."""

    def __init__(
        self, registry: Registry, *, history_limit: int = 1000, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = registry
        self.clock = clock
        self._lock = threading.RLock()
        self._watchers_changed = threading.Condition(self._lock)
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self.history = History(history_limit)
        self._watchers: set[Watcher] = set()
        self._watches_closed = False
        self._listeners: list[Listener] = []

    # ---- lookups --------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    @property
    def lock(self) -> threading.RLock:
        """Held across a read-decide-write that must not interleave with other writes (eviction)."""
        return self._lock

    def resolve(self, resource: ResourceType | str) -> ResourceType:
        """A type from itself, a plural (``pods``, ``nodemetrics``) or ``plural.group``."""
        if isinstance(resource, ResourceType):
            return resource
        plural, _, group = resource.partition(".")
        found = [rt for rt in self.registry.all() if rt.plural == plural and rt.group == group]
        if not found and not group:
            found = [rt for rt in self.registry.all() if rt.plural == plural]
        if not found:
            raise KeyError(f"no resource {resource!r} is served")
        return found[0]

    def _ns(self, rt: ResourceType, namespace: str | None, obj: Obj | None = None) -> str:
        if not rt.namespaced:
            return ""
        meta_ns = (obj or {}).get("metadata", {}).get("namespace")
        if namespace and meta_ns and meta_ns != namespace:
            raise status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        return namespace or meta_ns or "default"

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self._objects.setdefault(rt.key, {})

    def _current(self, rt: ResourceType, ns: str, name: str) -> Obj:
        found = self._bucket(rt).get((ns, name))
        if found is None:
            raise status.not_found(rt.plural, rt.group, name)
        return found

    def exists(self, resource: ResourceType | str, name: str, namespace: str | None = None) -> bool:
        rt = self.resolve(resource)
        with self._lock:
            return (self._ns(rt, namespace), name) in self._bucket(rt)

    def get(self, resource: ResourceType | str, name: str, namespace: str | None = None) -> Obj:
        rt = self.resolve(resource)
        with self._lock:
            return events.from_storage(rt, copy.deepcopy(self._current(rt, self._ns(rt, namespace), name)))

    def list(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> tuple[builtins.list[Obj], int]:
        """Matching objects sorted by namespace/name, and the revision the list is consistent at."""
        page = self.list_page(
            resource, namespace, field_selector=field_selector, label_selector=label_selector
        )
        return page.items, page.resource_version

    def list_page(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> Page:
        """A list as the API answers it, paged by ``limit``/``continue`` (:mod:`tests.apiserver.paging`)."""
        rt = self.resolve(resource)
        selector = self._selector(rt, field_selector, label_selector)
        with self._lock:
            at, start = paging.starting_point(
                continue_token, resource_version, resource_version_match, self._rv
            )
            if at == self._rv:
                state = [v for _, v in sorted(self._bucket(rt).items())]
            else:
                try:
                    state = self.history.snapshot(rt.key, self._bucket(rt), at, self._rv)
                except status.APIError as err:
                    if err.code == 410 and continue_token:
                        raise paging.expired() from err
                    raise
            items = [
                copy.deepcopy(o)
                for o in state
                if (namespace is None or o["metadata"].get("namespace", "") == namespace)
                and paging.after(o, start)
                and selector.matches(o)
            ]
        page, token, remaining = paging.cut(items, limit, at, counted=selector.empty)
        return Page([events.from_storage(rt, o) for o in page], at, token, remaining)

    @staticmethod
    def _selector(rt: ResourceType, field_selector: str | None, label_selector: str | None) -> Selector:
        return Selector.parse(
            field_selector, label_selector, rt.fields, dict(rt.field_defaults), dict(rt.field_labels)
        )

    # ---- writes ---------------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` after every committed write, under the store lock (controllers use this)."""
        with self._lock:
            self._listeners.append(listener)

    def _commit(self, rt: ResourceType, typ: str, obj: Obj, old: Obj | None) -> Obj:
        if rt.key == CRD_KEY:
            crd_written(self.registry, typ, obj)
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if typ == "DELETED":
            del self._bucket(rt)[key]
        else:
            self._bucket(rt)[key] = obj
        event = WatchEvent(self._rv, rt.key, typ, copy.deepcopy(obj), old)
        self.history.record(event)
        for w in self._watchers:
            w.offer(event)
        for listener in self._listeners:
            listener(event)
        return copy.deepcopy(obj)

    # ---- watch ----------------------------------------------------------------------------------------

    def watch(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> tuple[Watcher, builtins.list[tuple[str, Obj]]]:
        """Subscribe; returns the watcher and the events to send first.

        Without a resourceVersion (or with "0") the first events are a synthetic ADDED per existing
        object; with one, every kept write of this resource newer than it is replayed. A version older
        than the resource's kept history raises 410 Gone.
        """
        rt = self.resolve(resource)
        selector = self._selector(rt, field_selector, label_selector)
        with self._lock:
            initial: builtins.list[tuple[str, Obj]] = []
            if resource_version in (None, "", "0"):
                initial = [
                    ("ADDED", events.from_storage(rt, copy.deepcopy(o)))
                    for (ns, _), o in sorted(self._bucket(rt).items())
                    if (namespace is None or ns == namespace) and selector.matches(o)
                ]
                replay: builtins.list[WatchEvent] = []
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise status.bad_request(f"invalid resource version: {resource_version}") from None
                replay = builtins.list(self.history.since(rt.key, since, self._rv))
            # The watcher has seen every revision up to now: the replay carries this resource's writes
            # after ``since`` and the rest are other resources', so a BOOKMARK may name the current one
            # (a client that listed just before another resource's write otherwise stays behind).
            watcher = Watcher(rt, namespace, selector, self._rv, self.unsubscribe)
            for ev in replay:
                watcher.offer(ev)
            if self._watches_closed:
                watcher.offer(None)
            else:
                self._watchers.add(watcher)
                self._watchers_changed.notify_all()
            return watcher, initial

    def unsubscribe(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)
            self._watchers_changed.notify_all()

    def wait_for_watchers(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` watches are open (a test's cue that a client is listening)."""
        with self._lock:
            return self._watchers_changed.wait_for(lambda: len(self._watchers) >= n, timeout)

    def close_watchers(self) -> None:
        """End every open watch (their streams then finish) and any started until :meth:`open_watches`."""
        with self._lock:
            self._watches_closed = True
            for w in self._watchers:
                w.offer(None)
            self._watchers.clear()

    def open_watches(self) -> None:
        with self._lock:
            self._watches_closed = False

    def compact(self) -> None:
        """Forget all history (etcd compaction): any older resourceVersion now gets 410 Gone."""
        with self._lock:
            self.history.compact(self._rv)
