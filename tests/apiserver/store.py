"""The object store behind the test API server: resourceVersions, history, watchers.

Every write (create, update, status update, delete) takes the next value of one global counter as its
``resourceVersion`` (etcd's revision), is kept in a bounded history for watch resumption, and is fanned out
to watchers. The server sets ``uid``, ``creationTimestamp`` and ``generation`` (bumped when anything but
metadata and status changes). Tests may call :class:`Store` directly to seed or change objects; those
writes are seen by watchers exactly like API writes. Deletion is immediate (no finalizers, no graceful
deletion), and namespaces need not exist for namespaced objects to be created in them.
"""

from __future__ import annotations

import builtins
import copy
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from tests.apiserver import patch, status
from tests.apiserver.resources import CRD_KEY, Registry, ResourceType, crd_written
from tests.apiserver.selectors import Selector
from tests.apiserver.watch import Watcher, WatchEvent

Obj = dict[str, Any]
_SERVER_META = ("uid", "creationTimestamp", "generation", "resourceVersion", "name", "namespace")


def now_rfc3339(clock: Callable[[], float]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


def _body(obj: Obj) -> Obj:
    """Everything a generation bump looks at: all but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Store:
    """Objects of every served resource, keyed by (group, plural) then (namespace, name)."""

    def __init__(
        self, registry: Registry, *, history_limit: int = 1000, clock: Callable[[], float] = time.time
    ) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        self.registry = registry
        self.clock = clock
        self._lock = threading.RLock()
        self._watchers_changed = threading.Condition(self._lock)
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._history: deque[WatchEvent] = deque(maxlen=history_limit)
        self._watchers: set[Watcher] = set()
        self._watches_closed = False

    # ---- lookups --------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

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

    def get(self, resource: ResourceType | str, name: str, namespace: str | None = None) -> Obj:
        rt = self.resolve(resource)
        with self._lock:
            return copy.deepcopy(self._current(rt, self._ns(rt, namespace), name))

    def list(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> tuple[list[Obj], int]:
        """Matching objects sorted by namespace/name, and the revision the list is consistent at."""
        rt = self.resolve(resource)
        selector = Selector.parse(field_selector, label_selector, rt.fields)
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self._bucket(rt).items())
                if (namespace is None or ns == namespace) and selector.matches(obj)
            ]
            return items, self._rv

    # ---- writes ---------------------------------------------------------------------------------------

    def _admit(self, rt: ResourceType, obj: Obj, name: str, strict: bool) -> Obj:
        """Prune unknown fields (or refuse them when ``strict``, i.e. ``fieldValidation=Strict``), then
        check the schema: kube-apiserver's order for custom resources."""
        if strict:
            unknown = [m for _, m in rt.schema_errors(obj, strict=True) if "Additional properties" in m]
            if unknown:
                raise status.bad_request(f"strict decoding error: {'; '.join(unknown)}")
        pruned: Obj = rt.prune(obj)
        causes = rt.schema_errors(pruned, strict=False)
        if causes:
            raise status.invalid(rt.kind, rt.group, name, causes)
        return pruned

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
        self._history.append(event)
        for w in self._watchers:
            w.offer(event)
        return copy.deepcopy(obj)

    def create(
        self,
        resource: ResourceType | str,
        obj: Obj,
        namespace: str | None = None,
        *,
        keep_status: bool = True,
        strict: bool = False,
    ) -> Obj:
        """Store a new object (409 AlreadyExists if taken). ``keep_status=False`` drops ``.status``, as
        API creates of a resource with a status subresource do."""
        rt = self.resolve(resource)
        new = copy.deepcopy(obj)
        meta = new.setdefault("metadata", {})
        with self._lock:
            ns = self._ns(rt, namespace, new)
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise _required(rt, "metadata.name", "name or generateName is required")
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            name = meta["name"]
            if meta.get("resourceVersion") not in (None, ""):
                # etcd3 storage refuses this, and kube-apiserver answers it as an internal error.
                raise status.internal("resourceVersion should not be set on objects to be created")
            if (ns, name) in self._bucket(rt):
                raise status.already_exists(rt.plural, rt.group, name)
            if rt.namespaced:
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            if not keep_status and rt.status_subresource:
                new.pop("status", None)
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            meta.pop("resourceVersion", None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339(self.clock)
            meta["generation"] = 1
            new = self._admit(rt, new, name, strict)
            return self._commit(rt, "ADDED", new, None)

    def update(
        self,
        resource: ResourceType | str,
        obj: Obj,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        require_resource_version: bool = False,
        strict: bool = False,
    ) -> Obj:
        """Replace an object (PUT semantics).

        A ``metadata.resourceVersion`` that is not the current one is a 409 Conflict. On a resource with
        a status subresource, a main write keeps the stored ``.status`` and ``subresource="status"``
        changes only ``.status``. An update that changes nothing writes nothing (no new revision).
        """
        rt = self.resolve(resource)
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise status.bad_request("name is required in metadata")
        with self._lock:
            ns = self._ns(rt, namespace, obj)
            old = self._current(rt, ns, name)
            given_rv = meta.get("resourceVersion")
            if given_rv in (None, ""):
                if require_resource_version:
                    raise _required(rt, "metadata.resourceVersion", "0x0: must be specified for an update")
            elif str(given_rv) != old["metadata"]["resourceVersion"]:
                raise status.conflict(rt.plural, rt.group, name, status.STALE)
            if subresource == "status" and rt.status_subresource:
                new = copy.deepcopy(old)
                if "status" in obj:
                    new["status"] = copy.deepcopy(obj["status"])
                else:
                    new.pop("status", None)
            elif subresource is None:
                new = copy.deepcopy(obj)
                new["apiVersion"], new["kind"] = rt.api_version, rt.kind
                if rt.status_subresource:
                    new.pop("status", None)
                    if "status" in old:
                        new["status"] = copy.deepcopy(old["status"])
                new_meta = new.setdefault("metadata", {})
                for field in _SERVER_META:
                    if field in old["metadata"]:
                        new_meta[field] = old["metadata"][field]
                    else:
                        new_meta.pop(field, None)
            else:
                raise status.APIError(
                    404, f"the server could not find the requested resource ({subresource})"
                )
            new = self._admit(rt, new, name, strict)
            if _body(new) != _body(old):  # compared after pruning: dropped unknown fields change nothing
                new["metadata"]["generation"] = int(old["metadata"].get("generation", 0)) + 1
            if new == old:
                return copy.deepcopy(old)
            return self._commit(rt, "MODIFIED", new, copy.deepcopy(old))

    def patch(
        self,
        resource: ResourceType | str,
        name: str,
        body: Any,
        content_type: str = patch.MERGE,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """Apply a PATCH atomically (the real server's GuaranteedUpdate). A patch that sets
        ``metadata.resourceVersion`` makes it a precondition (409 when stale)."""
        rt = self.resolve(resource)
        with self._lock:
            ns = self._ns(rt, namespace)
            current = self._current(rt, ns, name)
            patched = patch.apply(current, body, content_type)
            meta = patched.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise status.bad_request("metadata must be an object")
            if meta.get("name") != name:
                raise status.bad_request("the name of a patched object cannot change")
            if meta.get("resourceVersion") in (None, ""):
                meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self.update(rt, patched, ns or None, subresource=subresource)

    def guaranteed_update(
        self,
        resource: ResourceType | str,
        name: str,
        namespace: str | None,
        mutate: Callable[[Obj], Obj],
        *,
        dry_run: bool = False,
    ) -> Obj:
        """Storage's GuaranteedUpdate: ``mutate`` gets a copy of the current object under the lock and
        returns the object to write as is (no strategy, no generation bump); it raises APIError to
        refuse. Subresources such as pods/binding write this way."""
        rt = self.resolve(resource)
        with self._lock:
            old = self._current(rt, self._ns(rt, namespace), name)
            new = mutate(copy.deepcopy(old))
            if new == old:
                return copy.deepcopy(old)
            if dry_run:
                return copy.deepcopy(new)
            return self._commit(rt, "MODIFIED", new, copy.deepcopy(old))

    def delete(
        self,
        resource: ResourceType | str,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        """Remove an object at once; ``uid``/``resource_version`` are DeleteOptions preconditions (409)."""
        rt = self.resolve(resource)
        with self._lock:
            ns = self._ns(rt, namespace)
            old = self._current(rt, ns, name)
            have_uid, have_rv = old["metadata"]["uid"], old["metadata"]["resourceVersion"]
            if uid is not None and uid != have_uid:
                why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {have_uid}"
                raise status.conflict(rt.plural, rt.group, name, why)
            if resource_version is not None and resource_version != have_rv:
                why = (
                    f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                    f"ResourceVersion in object meta: {have_rv}"
                )
                raise status.conflict(rt.plural, rt.group, name, why)
            return self._commit(rt, "DELETED", copy.deepcopy(old), copy.deepcopy(old))

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
        object; with one, every kept write newer than it is replayed. A version older than the kept
        history raises 410 Gone.
        """
        rt = self.resolve(resource)
        selector = Selector.parse(field_selector, label_selector, rt.fields)
        with self._lock:
            initial: builtins.list[tuple[str, Obj]] = []
            if resource_version in (None, "", "0"):
                initial = [
                    ("ADDED", copy.deepcopy(o))
                    for (ns, _), o in sorted(self._bucket(rt).items())
                    if (namespace is None or ns == namespace) and selector.matches(o)
                ]
                since = self._rv
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise status.bad_request(f"invalid resource version: {resource_version}") from None
                oldest = self._history[0].rv if self._history else self._rv + 1
                if since < self._rv and since < oldest - 1:
                    raise status.gone(since, oldest - 1)
            watcher = Watcher(rt, namespace, selector, since, self.unsubscribe)
            for ev in self._history:
                if ev.rv > since:
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
            self._history.clear()


def _required(rt: ResourceType, field: str, message: str) -> status.APIError:
    return status.invalid(rt.kind, rt.group, "", [(field, message)])
