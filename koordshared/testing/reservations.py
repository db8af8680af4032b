"""Builders for Koordinator's Reservation (``scheduling.koordinator.sh/v1alpha1``) as the API server stores
one, for the Reservation plugin's tests and for plugin authors whose plugins give back reserved room
(NodeNUMAResource, DeviceShare). Independent of pytest.

    r = reservation("r1", {"cpu": "4"}, owners=[owner_labels({"app": "web"})])
    placed = available(r, "node-a")
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import format_time


def owner_labels(labels: Mapping[str, str]) -> dict[str, Any]:
    """An owner matching the pods with these labels."""
    return {"labelSelector": {"matchLabels": dict(labels)}}


def owner_pod(name: str, namespace: str = "default") -> dict[str, Any]:
    """An owner matching the pod of that name."""
    return {"object": {"name": name, "namespace": namespace}}


def reservation(
    name: str,
    requests: Mapping[str, str],
    *,
    owners: Sequence[Mapping[str, Any]] = ({"labelSelector": {}},),
    scheduler_name: str = "koord-scheduler",
    node_name: str = "",
    ttl: str | None = None,
    expires: float | None = None,
    allocate_once: bool | None = None,
    policy: str | None = None,
    unschedulable: bool = False,
    taints: Sequence[Mapping[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: float | None = None,
    uid: str | None = None,
    host_port: int | None = None,
) -> dict[str, Any]:
    """A pending Reservation holding ``requests`` for ``owners`` (default: any pod, through an empty label
    selector: the CRD refuses an owner with no field); ``node_name`` pins
    it to a node (``template.spec.nodeName``); ``created`` is its creation time (wall seconds)."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "reserve",
        "resources": {"requests": dict(requests)},
    }
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
    tspec: dict[str, Any] = {"schedulerName": scheduler_name, "containers": [container]}
    if node_name:
        tspec["nodeName"] = node_name
    spec: dict[str, Any] = {"template": {"metadata": {}, "spec": tspec}, "owners": [dict(o) for o in owners]}
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = format_time(expires)
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    if policy is not None:
        spec["allocatePolicy"] = policy
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid or str(uuid.uuid4()),
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if created is not None:
        meta["creationTimestamp"] = format_time(created)
    return {
        "apiVersion": groups.RESERVATIONS.api_version,
        "kind": groups.RESERVATIONS.kind,
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def available(
    r: Mapping[str, Any], node: str, allocatable: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``r`` as placed on ``node`` (Available, holding ``allocatable``: default its template's requests)."""
    held = allocatable
    if held is None:
        containers = r["spec"]["template"]["spec"]["containers"]
        held = dict(containers[0]["resources"]["requests"])
    status = {
        "phase": "Available",
        "nodeName": node,
        "allocatable": dict(held),
        "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
            {"type": "Ready", "status": "True", "reason": "Available"},
        ],
    }
    return {**r, "status": status}
