"""The Kubernetes API side of the informer: the shared :class:`~koordshared.kube.informer.Informer` for each
object the agent watches (its Node, its pods, its NodeSLO, NodeMetric and NodeResourceTopology, each by field
selector so nothing of other nodes is cached) and the few writes (the NodeMetric status, replaced whole; the
NodeResourceTopology, Eviction, Event); the client itself is made by :mod:`koordshared.kube.client`, and
its errors are mapped there (:func:`~koordshared.kube.client.call`), so this works on either client and
imports no ``kubernetes`` module itself.

Every call goes on the resource's REST path (:func:`koordshared.kube.client.send`), never through
the typed API classes, whose import builds hundreds of pydantic models the agent has no use for. Objects
travel as plain JSON dicts decoded from the response body, the same shape the kubelet serves, so one
builder serves every source (a watch decoded through the models would break on any object they refuse).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from koordlet.statesinformer.eviction import EvictResult
from koordshared.apis.meta import groups
from koordshared.kube.client import ApiError, call, close_client, send
from koordshared.kube.informer import Informer, without_managed_fields
from koordshared.kube.informers import PathList
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

NM = groups.NODE_METRICS
NRT = groups.NODE_RESOURCE_TOPOLOGIES
_NODE_NAMED = (groups.NODE_SLOS, groups.NODE_METRICS, NRT)
CONFLICT_ATTEMPTS = 4
"""Writes of one NodeMetric report before a 409 is handed back (koordlet's ``RetryOnConflict`` with
client-go's ``DefaultBackoff``: 4 steps)."""


def _status_update(obj: Any, status: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a status PUT: the object's identity and resourceVersion (the server refuses an update
    of a custom resource without one, and answers 409 to a stale one or another UID) and the new
    status; the server keeps everything else as stored."""
    meta = (obj.get("metadata") if isinstance(obj, Mapping) else None) or {}
    keep = {k: meta[k] for k in ("name", "uid", "resourceVersion") if meta.get(k)}
    return {
        "apiVersion": NM.api_version,
        "kind": NM.kind,
        "metadata": keep,
        "status": dict(status),
    }


class ClusterAPI:
    """The calls the informer makes; the writes map the server's answers to results (HTTP statuses) and
    an unreachable server to :class:`APIUnavailable`."""

    def __init__(self, api_client: Any, node_name: str, request_timeout: float = 10.0) -> None:
        self.api_client = api_client
        self.node_name = node_name
        self.timeout = request_timeout

    # informers -----------------------------------------------------------------------------------

    def _informer(self, resource: groups.Resource, name: str, field_selector: str, **opts: Any) -> Informer:
        # REST paths, not the typed API classes: importing CoreV1Api builds some 250 pydantic models
        # (about 10 MiB of the agent's memory) for calls whose answers are decoded as plain JSON anyway
        list_fn = PathList(self.api_client, resource.path())
        kwargs = {"field_selector": field_selector}
        return Informer(name, list_fn, kwargs, transform=without_managed_fields, **opts)

    def pods_informer(self, **opts: Any) -> Informer:
        """The pods of this node (``fieldSelector=spec.nodeName=<node>``); ``opts`` go to
        :class:`Informer`."""
        return self._informer(groups.PODS, "pods", groups.on_node(self.node_name), **opts)

    def node_informer(self, **opts: Any) -> Informer:
        """This node's Node (``fieldSelector=metadata.name=<node>``)."""
        return self._informer(groups.NODES, "node", groups.named(self.node_name), **opts)

    def custom_informer(self, plural: str, **opts: Any) -> Informer:
        """This node's object of a cluster-scoped custom resource named after the node (NodeSLO,
        NodeMetric, NodeResourceTopology)."""
        resource = next(r for r in _NODE_NAMED if r.plural == plural)
        return self._informer(resource, plural, groups.named(self.node_name), **opts)

    # writes ----------------------------------------------------------------------------------------

    def _send(self, what: str, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """The decoded answer of one request; :class:`ApiError` for a non-2xx answer,
        :class:`APIUnavailable` when the server could not be reached."""
        return call(what, lambda: send(self.api_client, method, path, body=body, timeout=self.timeout))

    def get_node_object(self, resource: groups.Resource) -> Any:
        """This node's object of a node-named custom resource, as the server holds it."""
        return self._send(f"{resource.plural} get", "GET", resource.path(self.node_name))

    def update_node_metric_status(self, status: Mapping[str, Any], current: Mapping[str, Any] | None) -> int:
        """Replace ``/status`` of this node's NodeMetric with ``status`` (koordlet's ``UpdateStatus``):
        a PUT of the status subresource at the resourceVersion (and UID) of ``current``, the object as
        the watch holds it (read from the server when ``None``): a PUT replaces the whole status, where a
        merge patch would leave behind every key the new status omits. A 409 is retried at once on a fresh
        read, up to :data:`CONFLICT_ATTEMPTS` writes. Returns the HTTP status (200, 404 when the object
        does not exist, 409/429/5xx as last answered); connection errors raise :class:`APIUnavailable`."""

        obj = current
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                if obj is None:
                    obj = self.get_node_object(NM)
                self._send(
                    "nodemetric status",
                    "PUT",
                    NM.path(self.node_name) + "/status",
                    _status_update(obj, status),
                )
            except ApiError as err:
                code = err.status or 500
                if code != 409:
                    return code
                obj = None  # read again: the cache may not have seen the newer object yet
                continue
            return 200
        return 409

    def create_node_metric(self) -> int:
        body = {
            "apiVersion": groups.NODE_METRICS.api_version,
            "kind": groups.NODE_METRICS.kind,
            "metadata": {"name": self.node_name},
        }
        try:
            self._send("nodemetric create", "POST", NM.path(), body)
        except ApiError as err:
            return err.status or 500
        return 201

    def write_node_topology(self, body: Mapping[str, Any], *, create: bool) -> int:
        """Create this node's NodeResourceTopology, or replace it (``body`` carries the resourceVersion it
        was read at, so a concurrent change is a 409); returns the HTTP status (201/200 on success)."""

        try:
            if create:
                self._send("noderesourcetopology create", "POST", NRT.path(), body)
            else:
                self._send("noderesourcetopology update", "PUT", NRT.path(self.node_name), body)
        except ApiError as err:
            return err.status or 500
        return 201 if create else 200

    def evict(self, namespace: str, name: str, uid: str) -> EvictResult:
        """policy/v1 Eviction with a UID precondition (never evicts a same-named successor)."""

        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        try:
            self._send("eviction", "POST", groups.PODS.path(name, namespace) + "/eviction", body)
        except ApiError as err:
            return {429: EvictResult.BLOCKED, 404: EvictResult.GONE, 409: EvictResult.CONFLICT}.get(
                err.status, EvictResult.ERROR
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
            self._send("event", "POST", f"/api/v1/namespaces/{ns}/events", body)
        except (ApiError, APIUnavailable) as err:
            log.info("event %s on %s/%s not recorded: %s", reason, kind, name, str(err))
            return False
        return True

    def close(self) -> None:
        close_client(self.api_client)
