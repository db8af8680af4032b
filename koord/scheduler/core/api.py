"""What koord-scheduler writes to the API server, behind one interface: the binding (``POST
pods/<name>/binding`` with the pod's UID as precondition, as DefaultBinder does), the ``PodScheduled``
condition and ``nominatedNodeName`` (status PATCH), the one metadata PATCH of DefaultPreBind, Events
(``events.k8s.io/v1``, as kube-scheduler writes them: :mod:`koord.scheduler.core.events`), and the
deletion of preemption victims; for plugins' own objects (an ElasticQuota's or a PodGroup's
status, a Reservation's...), a create, a JSON merge patch (of a subresource too), a deletion, and a pod's
eviction (``policy/v1``, as Koordinator's quota revoke evicts).
:class:`MemoryAPI` does the same in memory (benchmarks, tests);
:class:`FencedAPI` wraps either so that only the leader writes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from koord.scheduler.core.events import ProfileEvents
from koord.scheduler.framework.interface import SCHEDULING, EventHandle
from koord.scheduler.framework.types import Obj
from koordshared.apis.core.pod import binding, pod_key
from koordshared.apis.meta.groups import Resource
from koordshared.kube.client import ApiError, request
from koordshared.kube.eventsv1 import EventBroadcaster
from koordshared.runtime.errors import APIUnavailable


class APIFailed(Exception):
    """A write failed; ``conflict`` when the server refused it because the object changed (a pod already
    bound, deleted, or re-created under its name)."""

    def __init__(self, message: str, *, conflict: bool = False, gone: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict
        self.gone = gone


class ClusterAPI(EventHandle, Protocol):
    """The writes (``event`` as :class:`koord.scheduler.framework.interface.EventHandle` says)."""

    def bind(self, pod: Obj, node: str) -> None: ...

    def patch_status(self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None) -> None:
        """Set the ``PodScheduled`` condition and/or ``status.nominatedNodeName`` (``""`` clears it)."""

    def patch_metadata(self, pod: Obj, patch: Mapping[str, Any]) -> None: ...

    def delete_pod(self, pod: Obj) -> None: ...

    def create_object(self, resource: Resource, obj: Obj) -> None:
        """``POST`` ``obj`` (``APIFailed`` with ``conflict`` when it exists already)."""

    def patch_object(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> None:
        """A JSON merge patch of the object, or of its ``subresource`` (``status``); ``APIFailed`` with
        ``gone`` when it does not exist, with ``conflict`` when a ``metadata.resourceVersion`` in the patch
        is not the object's."""

    def delete_object(self, resource: Resource, namespace: str, name: str) -> None:
        """``DELETE`` the object (one gone already: ``APIFailed`` with ``gone``)."""

    def evict_pod(self, pod: Obj) -> None:
        """``POST pods/<name>/eviction`` (a ``policy/v1`` Eviction: PodDisruptionBudgets apply)."""


def _meta(pod: Obj) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or "")


class KubeAPI:
    """On the official client's ApiClient (raw JSON requests; Events through an
    :class:`~koordshared.kube.eventsv1.EventBroadcaster` whose thread the process runs, one recorder per
    profile: ``scheduler_names``, the first one the default)."""

    def __init__(
        self,
        api_client: Any,
        events: EventBroadcaster,
        timeout: float = 10.0,
        scheduler_names: Sequence[str] = ("koord-scheduler",),
    ) -> None:
        self._api = api_client
        self._events = ProfileEvents(events, scheduler_names)
        self._timeout = timeout

    def _send(
        self, what: str, method: str, path: str, body: Any, content_type: str = "application/json"
    ) -> None:
        try:
            request(
                self._api, what, method, path, body=body, timeout=self._timeout, content_type=content_type
            )
        except ApiError as err:
            raise APIFailed(str(err), conflict=err.conflict, gone=err.not_found) from err
        except APIUnavailable as err:
            raise APIFailed(str(err)) from err

    def bind(self, pod: Obj, node: str) -> None:
        ns, name, uid = _meta(pod)
        path, body = binding(ns, name, uid, node)
        self._send(f"bind {ns}/{name} to {node}", "POST", path, body)

    def patch_status(self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None) -> None:
        ns, name, uid = _meta(pod)
        status: dict[str, Any] = {}
        if condition is not None:
            # A strategic merge patch merges conditions by type, as kube-scheduler's status update does.
            status["conditions"] = [dict(condition)]
        if nominated_node is not None:
            status["nominatedNodeName"] = nominated_node or None
        body = {"metadata": {"uid": uid}, "status": status} if uid else {"status": status}
        self._send(
            f"status of {ns}/{name}",
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}/status",
            body,
            "application/strategic-merge-patch+json",
        )

    def patch_metadata(self, pod: Obj, patch: Mapping[str, Any]) -> None:
        ns, name, _ = _meta(pod)
        self._send(
            f"patch {ns}/{name}",
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}",
            dict(patch),
            "application/merge-patch+json",
        )

    def event(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        action: str = SCHEDULING,
        related: Obj | None = None,
    ) -> None:
        self._events.event(obj, related, type_, reason, action, message)

    def delete_pod(self, pod: Obj) -> None:
        ns, name, uid = _meta(pod)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}} if uid else None
        self._send(f"delete {ns}/{name}", "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", body)

    def create_object(self, resource: Resource, obj: Obj) -> None:
        ns = str((obj.get("metadata") or {}).get("namespace") or "")
        name = str((obj.get("metadata") or {}).get("name") or "")
        self._send(f"create {resource.kind} {ns}/{name}", "POST", resource.path(namespace=ns), dict(obj))

    def patch_object(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> None:
        path = resource.path(name, namespace) + (f"/{subresource}" if subresource else "")
        self._send(
            f"patch {resource.kind} {namespace}/{name}",
            "PATCH",
            path,
            dict(patch),
            "application/merge-patch+json",
        )

    def delete_object(self, resource: Resource, namespace: str, name: str) -> None:
        self._send(
            f"delete {resource.kind} {namespace}/{name}", "DELETE", resource.path(name, namespace), None
        )

    def evict_pod(self, pod: Obj) -> None:
        ns, name, uid = _meta(pod)
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        self._send(f"evict {ns}/{name}", "POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body)


class MemoryAPI:
    """Every write recorded; ``on_bind(pod, node)`` lets a test or benchmark feed the bound pod back to
    the informer caches, as the API server's watch would."""

    def __init__(self, on_bind: Callable[[Obj, str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self.bindings: dict[str, str] = {}
        self.statuses: dict[str, list[tuple[Mapping[str, Any] | None, str | None]]] = {}
        self.patches: dict[str, list[Mapping[str, Any]]] = {}
        self.events: list[tuple[str, str, str, str]] = []
        self.deleted: list[str] = []
        self.evicted: list[str] = []
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        """Objects plugins created, by (plural, namespace, name), with their patches applied."""
        self.object_patches: list[tuple[str, str, str, Mapping[str, Any]]] = []
        """(plural or ``plural/subresource``, namespace, name, patch) of every object patch."""
        self.deleted_objects: list[tuple[str, str, str]] = []
        self.fail_bind: Callable[[Obj, str], str] | None = None
        """A test hook: the error to raise for a binding (``""``: bind)."""
        self._on_bind = on_bind

    def bind(self, pod: Obj, node: str) -> None:
        ns, name, _ = _meta(pod)
        key = f"{ns}/{name}"
        failure = self.fail_bind(pod, node) if self.fail_bind is not None else ""
        if failure:
            raise APIFailed(failure)
        with self._lock:
            if key in self.bindings:
                raise APIFailed(f"pod {key} is already assigned to node {self.bindings[key]}", conflict=True)
            self.bindings[key] = node
        if self._on_bind is not None:
            self._on_bind(pod, node)

    def patch_status(self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None) -> None:
        ns, name, _ = _meta(pod)
        with self._lock:
            self.statuses.setdefault(f"{ns}/{name}", []).append((condition, nominated_node))

    def patch_metadata(self, pod: Obj, patch: Mapping[str, Any]) -> None:
        ns, name, _ = _meta(pod)
        with self._lock:
            self.patches.setdefault(f"{ns}/{name}", []).append(json.loads(json.dumps(patch)))

    def event(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        action: str = SCHEDULING,
        related: Obj | None = None,
    ) -> None:
        with self._lock:
            self.events.append((pod_key(obj), type_, reason, message))

    def delete_pod(self, pod: Obj) -> None:
        ns, name, _ = _meta(pod)
        with self._lock:
            self.deleted.append(f"{ns}/{name}")

    def create_object(self, resource: Resource, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = (resource.plural, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            if key in self.objects:
                raise APIFailed(f"{resource.kind} {key[1]}/{key[2]} already exists", conflict=True)
            self.objects[key] = json.loads(json.dumps(obj))

    def patch_object(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> None:
        what = f"{resource.plural}/{subresource}" if subresource else resource.plural
        with self._lock:
            self.object_patches.append((what, namespace, name, json.loads(json.dumps(patch))))
            target = self.objects.get((resource.plural, namespace, name))
            if target is not None:
                _merge(target, patch)

    def delete_object(self, resource: Resource, namespace: str, name: str) -> None:
        with self._lock:
            self.deleted_objects.append((resource.plural, namespace, name))
            self.objects.pop((resource.plural, namespace, name), None)

    def evict_pod(self, pod: Obj) -> None:
        ns, name, _ = _meta(pod)
        with self._lock:
            self.evicted.append(f"{ns}/{name}")


def _merge(into: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386: nested objects merged, ``null`` removes, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = json.loads(json.dumps(value))


class FencedAPI:
    """A :class:`ClusterAPI` that writes only while ``allowed()`` (the replica leads and is not stopping)
    and counts the writes under way, so that a stopping leader lets them land (:meth:`drain`) before its
    Lease goes to another replica. A refused write raises :class:`APIFailed`, as a failed one does.
    Events pass: they change nothing another scheduler reads."""

    def __init__(self, inner: ClusterAPI, allowed: Callable[[], bool]) -> None:
        self.inner = inner
        self._allowed = allowed
        self._cond = threading.Condition()
        self._writing = 0

    @contextmanager
    def _write(self, what: str, pod: Obj) -> Iterator[None]:
        with self._cond:
            if not self._allowed():
                ns, name, _ = _meta(pod)
                raise APIFailed(f"{what} {ns}/{name}: not sent, this replica is not leading (or is stopping)")
            self._writing += 1
        try:
            yield
        finally:
            with self._cond:
                self._writing -= 1
                self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until no write is under way (each ends within the request timeout); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._writing == 0, timeout)

    def bind(self, pod: Obj, node: str) -> None:
        with self._write("bind", pod):
            self.inner.bind(pod, node)

    def patch_status(self, pod: Obj, condition: Mapping[str, Any] | None, nominated_node: str | None) -> None:
        with self._write("status of", pod):
            self.inner.patch_status(pod, condition, nominated_node)

    def patch_metadata(self, pod: Obj, patch: Mapping[str, Any]) -> None:
        with self._write("patch", pod):
            self.inner.patch_metadata(pod, patch)

    def event(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        action: str = SCHEDULING,
        related: Obj | None = None,
    ) -> None:
        self.inner.event(obj, type_, reason, message, action=action, related=related)

    def delete_pod(self, pod: Obj) -> None:
        with self._write("delete", pod):
            self.inner.delete_pod(pod)

    def create_object(self, resource: Resource, obj: Obj) -> None:
        with self._write(f"create {resource.kind}", obj):
            self.inner.create_object(resource, obj)

    def patch_object(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> None:
        with self._write(f"patch {resource.kind}", {"metadata": {"namespace": namespace, "name": name}}):
            self.inner.patch_object(resource, namespace, name, patch, subresource=subresource)

    def delete_object(self, resource: Resource, namespace: str, name: str) -> None:
        with self._write(f"delete {resource.kind}", {"metadata": {"namespace": namespace, "name": name}}):
            self.inner.delete_object(resource, namespace, name)

    def evict_pod(self, pod: Obj) -> None:
        with self._write("evict", pod):
            self.inner.evict_pod(pod)
