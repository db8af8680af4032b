"""Binding a pod to a node: ``POST pods/<name>/binding`` and the older ``POST namespaces/<ns>/bindings``.

Mirrors ``BindingREST.Create`` and ``setPodNodeAndMetadata`` in kubernetes'
``pkg/registry/core/pod/storage/storage.go``: the Binding's name must be the pod's, its target a Node by
name; the pod must be unbound, not being deleted and without scheduling gates (else 409 on
``pods/binding``); the Binding's ``metadata.uid``/``resourceVersion`` are preconditions on the pod. The
write sets ``spec.nodeName``, merges the Binding's annotations into the pod's and sets the ``PodScheduled``
condition, bypassing the pod update strategy (which would refuse a change of ``spec.nodeName``). The answer
is a 201 Success Status.
"""

from __future__ import annotations

from typing import Any

from koordshared.apis.core.pod import with_condition
from tests.apiserver import status
from tests.apiserver.store import Obj, Store
from tests.apiserver.writes import now_rfc3339

BINDING_CONFLICT = "pods/binding"


def bind(store: Store, namespace: str, url_name: str | None, body: Any, *, dry_run: bool = False) -> Obj:
    """Bind per a Binding ``body`` (``url_name`` is the pod named in a ``pods/<name>/binding`` URL)."""
    if not isinstance(body, dict):
        raise status.bad_request("the body of a Binding must be an object")
    meta = body.get("metadata") or {}
    name = meta.get("name") or ""
    if url_name is not None and name != url_name:
        raise status.bad_request("name in URL does not match name in Binding object")
    target = body.get("target") or {}
    causes = []
    if target.get("kind") not in (None, "", "Node"):
        causes.append(("target.kind", f"{target.get('kind')!r}: must be empty or 'Node'"))
    if not target.get("name"):
        causes.append(("target.name", "Required value"))
    if causes:
        raise status.invalid("Binding", "", name, causes)
    node = str(target["name"])
    annotations = meta.get("annotations") or {}
    uid, rv = meta.get("uid"), meta.get("resourceVersion")

    def assign(pod: Obj) -> Obj:
        pmeta = pod["metadata"]
        if uid and uid != pmeta["uid"]:
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pmeta['uid']}"
            raise status.conflict("pods", "", name, why)
        if rv and str(rv) != pmeta["resourceVersion"]:
            raise status.conflict("pods", "", name, status.STALE)
        if pmeta.get("deletionTimestamp"):
            why = f"pod {name} is being deleted, cannot be assigned to a host"
            raise status.conflict(BINDING_CONFLICT, "", name, why)
        spec = pod.setdefault("spec", {})
        if spec.get("nodeName"):
            why = f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            raise status.conflict(BINDING_CONFLICT, "", name, why)
        if spec.get("schedulingGates"):
            why = f"pod {name} has non-empty .spec.schedulingGates"
            raise status.conflict(BINDING_CONFLICT, "", name, why)
        spec["nodeName"] = node
        if annotations:
            pmeta["annotations"] = {**(pmeta.get("annotations") or {}), **annotations}
        pod_status = pod.setdefault("status", {})
        scheduled = {"type": "PodScheduled", "status": "True", "lastProbeTime": None}
        scheduled["lastTransitionTime"] = now_rfc3339(store.clock)
        pod_status["conditions"] = with_condition(pod_status.get("conditions") or (), scheduled)
        return pod

    store.guaranteed_update("pods", name, namespace, assign, dry_run=dry_run)
    return status.status_body(201, "", "", success=True)
