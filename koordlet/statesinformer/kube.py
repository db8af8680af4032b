"""The Kubernetes API side of the informer: list+watch loops and the few writes (NodeMetric status,
Eviction, Event); the client itself is made by :mod:`koordlet.cluster.client`. The only module of the
agent's own packages that imports ``kubernetes``.

The client is imported lazily (about a second of imports) so standalone agents and ``--help`` never pay
for it. Objects travel as plain JSON dicts (``raw_object``), the same shape the kubelet serves, so one
builder serves every source; pydantic models are never handed to the rest of the agent.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from koordlet.cluster.ratelimit import Backoff
from koordlet.errors import APIUnavailable
from koordlet.statesinformer.eviction import EvictResult

log = logging.getLogger(__name__)

SLO_GROUP = "slo.koordinator.sh"
SLO_VERSION = "v1alpha1"
Obj = Mapping[str, Any]


def _status_of(err: BaseException) -> int:
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else 0


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class ListWatch:
    """List, then watch from the list's resourceVersion; re-list on 410, back off on errors.

    ``on_list(items)`` replaces the caller's state; ``on_event(type, obj)`` applies one change. Both run
    on the loop's thread. :meth:`close` cuts a watch that is blocked on its socket.
    """

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        kwargs: Mapping[str, Any],
        on_list: Callable[[Sequence[Obj]], None],
        on_event: Callable[[str, Obj], None],
        *,
        watch_timeout: int = 300,
        request_timeout: float = 10.0,
        backoff: Backoff | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.name = name
        self._list_fn = list_fn
        self._kwargs = dict(kwargs)
        self._on_list = on_list
        self._on_event = on_event
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.backoff = backoff or Backoff()
        self._on_error = on_error
        self._watch: Any = None
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def _list(self) -> str:
        resp = self._list_fn(**self._kwargs, _preload_content=False, _request_timeout=self.request_timeout)
        doc = json.loads(resp.data)
        items = doc.get("items") or []
        self._on_list([i for i in items if isinstance(i, Mapping)])
        return str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def _watch_once(self, rv: str) -> str:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        w: Any = cast(Any, watch).Watch()
        with self._lock:
            if self._closed.is_set():
                return rv
            self._watch = w
        try:
            stream = w.stream(
                self._list_fn,
                **self._kwargs,
                resource_version=rv,
                timeout_seconds=self.watch_timeout,
                allow_watch_bookmarks=True,
                _request_timeout=(self.request_timeout, self.watch_timeout + self.request_timeout),
            )
            for ev in stream:
                typ, obj = str(ev.get("type", "")), ev.get("raw_object")
                if not isinstance(obj, Mapping):
                    continue
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if new_rv:
                    rv = str(new_rv)
                if typ in ("ADDED", "MODIFIED", "DELETED"):
                    self._on_event(typ, obj)
                self.backoff.reset()
        except ApiException as err:
            if err.status == 410:
                raise _Gone() from err
            raise
        finally:
            with self._lock:
                self._watch = None
        return rv

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` (or :meth:`close`): keep the caller's state in sync with the API server."""
        while not stop.is_set() and not self._closed.is_set():
            try:
                rv = self._list()
                self.backoff.reset()
                while rv and not stop.is_set() and not self._closed.is_set():
                    rv = self._watch_once(rv)
            except _Gone:
                log.info("%s: watch expired (410), listing again", self.name)
                continue
            except Exception as err:  # the client raises urllib3, socket, pydantic and API errors alike
                if self._closed.is_set() or stop.is_set():
                    return  # close() cut the stream: not an error
                delay = self.backoff.next()
                log.warning("%s: %s; retrying in %.1fs", self.name, str(err), delay)
                if self._on_error is not None:
                    self._on_error(err)
                if stop.wait(delay):
                    return

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            w = self._watch
        if w is not None:
            w.stop()


class WatchedObjects:
    """A dict of objects kept by a :class:`ListWatch` (keyed by ``namespace/name``), with a synced flag."""

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._objs: dict[str, Obj] = {}
        self._synced = False
        self._failing = False
        self._on_change = on_change

    @staticmethod
    def _key(obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def replace(self, items: Sequence[Obj]) -> None:
        with self._lock:
            self._objs = {self._key(o): o for o in items}
            self._synced = True
            self._failing = False
        if self._on_change is not None:
            self._on_change()

    def apply(self, typ: str, obj: Obj) -> None:
        with self._lock:
            if typ == "DELETED":
                self._objs.pop(self._key(obj), None)
            else:
                self._objs[self._key(obj)] = obj
        if self._on_change is not None:
            self._on_change()

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objs.values())

    def synced(self) -> bool:
        with self._lock:
            return self._synced

    def mark_failing(self, _err: BaseException | None = None) -> None:
        """The list+watch broke: the objects may be stale until the next successful list."""
        with self._lock:
            self._failing = True

    def failing(self) -> bool:
        with self._lock:
            return self._failing


class ClusterAPI:
    """The typed calls the informer makes; every method maps client errors to results or
    :class:`APIUnavailable` (connection errors, 5xx) so callers never see ``ApiException``."""

    def __init__(self, api_client: Any, node_name: str, request_timeout: float = 10.0) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.node_name = node_name
        self.timeout = request_timeout
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # list+watch factories ------------------------------------------------------------------------

    def pods_listwatch(self, objects: WatchedObjects, **opts: Any) -> ListWatch:
        sel = {"field_selector": f"spec.nodeName={self.node_name}"}
        return ListWatch(
            "pods",
            self.core.list_pod_for_all_namespaces,
            sel,
            objects.replace,
            objects.apply,
            on_error=objects.mark_failing,
            **opts,
        )

    def node_listwatch(self, objects: WatchedObjects, **opts: Any) -> ListWatch:
        sel = {"field_selector": f"metadata.name={self.node_name}"}
        return ListWatch("node", self.core.list_node, sel, objects.replace, objects.apply, **opts)

    def custom_listwatch(self, plural: str, objects: WatchedObjects, **opts: Any) -> ListWatch:
        kwargs = {
            "group": SLO_GROUP,
            "version": SLO_VERSION,
            "plural": plural,
            "field_selector": f"metadata.name={self.node_name}",
        }
        return ListWatch(
            plural, self.custom.list_cluster_custom_object, kwargs, objects.replace, objects.apply, **opts
        )

    # writes ----------------------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn()
        except ApiException:
            raise
        except Exception as err:  # urllib3/socket errors: the server is unreachable
            raise APIUnavailable(f"{what}: {err}") from err

    def patch_node_metric_status(self, status: Mapping[str, Any]) -> int:
        """Merge-patch ``/status`` of this node's NodeMetric; returns the HTTP status (200 on success,
        404 when the object does not exist, 409/429/5xx as the server answered); connection errors
        raise :class:`APIUnavailable`."""
        from kubernetes.client.exceptions import ApiException

        try:
            self._call(
                "nodemetric status",
                lambda: self.custom.patch_cluster_custom_object_status(
                    SLO_GROUP,
                    SLO_VERSION,
                    "nodemetrics",
                    self.node_name,
                    {"status": dict(status)},
                    _request_timeout=self.timeout,
                ),
            )
        except ApiException as err:
            return _status_of(err) or 500
        return 200

    def create_node_metric(self) -> int:
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}",
            "kind": "NodeMetric",
            "metadata": {"name": self.node_name},
        }
        try:
            self._call(
                "nodemetric create",
                lambda: self.custom.create_cluster_custom_object(
                    SLO_GROUP, SLO_VERSION, "nodemetrics", body, _request_timeout=self.timeout
                ),
            )
        except ApiException as err:
            return _status_of(err) or 500
        return 201

    def evict(self, namespace: str, name: str, uid: str) -> EvictResult:
        """policy/v1 Eviction with a UID precondition (never evicts a same-named successor)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)),
        )
        try:
            self._call(
                "eviction",
                lambda: self.core.create_namespaced_pod_eviction(
                    name, namespace, body, _request_timeout=self.timeout
                ),
            )
        except ApiException as err:
            code = _status_of(err)
            return {429: EvictResult.BLOCKED, 404: EvictResult.GONE, 409: EvictResult.CONFLICT}.get(
                code, EvictResult.ERROR
            )
        except APIUnavailable as err:
            log.warning("eviction of %s/%s: %s", namespace, name, str(err))
            return EvictResult.ERROR
        return EvictResult.EVICTED

    def create_event(
        self,
        kind: str,
        namespace: str,
        name: str,
        uid: str,
        type_: str,
        reason: str,
        message: str,
        now: float,
    ) -> bool:
        """A core/v1 Event about the object (best effort: False on any failure)."""
        from kubernetes.client.exceptions import ApiException

        ts = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ns = namespace or "default"
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": ns},
            "involvedObject": {"kind": kind, "namespace": namespace, "name": name, "uid": uid},
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": "koordlet", "host": self.node_name},
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
            "reportingComponent": "koordlet",
            "reportingInstance": self.node_name,
        }
        try:
            self._call(
                "event",
                lambda: self.core.create_namespaced_event(ns, body, _request_timeout=self.timeout),
            )
        except (ApiException, APIUnavailable) as err:
            log.info("event %s on %s/%s not recorded: %s", reason, kind, name, str(err))
            return False
        return True

    def close(self) -> None:
        self.api_client.close()
