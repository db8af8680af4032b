"""The Reservation a ReservationFirst PodMigrationJob places before it evicts (Koordinator's
``CreateOrUpdateReservationOptions``): the pod's own template without its node, kept off the pod's
node, for the pod's workload (or the pod itself when it was never scheduled), used once, ending with the
job's TTL; named after the job's UID and owned by the job, so deleting the job deletes it. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from koordshared.apis.core.pod import as_list, as_map, condition
from koordshared.apis.meta import groups
from koordshared.apis.scheduling import podmigrationjob as pmj
from koordshared.apis.scheduling import reservation as rsv

Obj = Mapping[str, Any]


def owners_for(pod: Obj) -> list[dict[str, Any]]:
    """Who may use the room: the pod itself while it waits unscheduled, else its controller."""
    meta = as_map(pod, "metadata")
    status = as_map(pod, "status")
    if status.get("phase") == "Pending":
        scheduled = condition(pod, "PodScheduled")
        if scheduled is not None and scheduled.get("status") == "False":
            ref = {
                "uid": meta.get("uid"),
                "kind": "Pod",
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
            }
            return [{"object": {k: str(v) for k, v in ref.items() if v}}]
    for owner in as_list(meta, "ownerReferences"):
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return [{"controller": {**dict(owner), "namespace": str(meta.get("namespace") or "")}}]
    return []


def _skip_node(spec: dict[str, Any], node: str) -> None:
    """Require a node other than ``node`` (a ``metadata.name NotIn`` field term in every node term)."""
    skip = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or []
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), dict(skip)]
    required["nodeSelectorTerms"] = terms or [{"matchFields": [skip]}]


def reservation_for(job: Obj, pod: Obj, now_ms: int) -> dict[str, Any]:
    """The Reservation ``job`` creates for ``pod`` (its ``reservationOptions.template`` filled in)."""
    given = as_map(as_map(as_map(job, "spec"), "reservationOptions"), "template")
    out: dict[str, Any] = copy.deepcopy(dict(given))
    meta = out.setdefault("metadata", {})
    meta["name"] = meta.get("name") or pmj.uid_of(job)
    meta.setdefault("labels", {})
    meta["labels"][pmj.LABEL_CREATED_BY] = pmj.CREATOR
    meta["labels"][rsv.LABEL_RESERVATION_ORDER] = str(now_ms)
    meta["ownerReferences"] = [
        {
            "apiVersion": pmj.API_VERSION,
            "kind": pmj.KIND,
            "name": pmj.name_of(job),
            "uid": pmj.uid_of(job),
            "controller": True,
        }
    ]
    spec = out.setdefault("spec", {})
    if not spec.get("template"):
        pmeta = as_map(pod, "metadata")
        spec["template"] = {
            "metadata": {
                k: copy.deepcopy(pmeta[k])
                for k in ("name", "namespace", "labels", "annotations")
                if pmeta.get(k)
            },
            "spec": copy.deepcopy(dict(as_map(pod, "spec"))),
        }
    if not spec.get("owners"):
        spec["owners"] = owners_for(pod)
    spec["allocateOnce"] = True  # the room is for this one move, not reused after
    tspec = spec["template"].setdefault("spec", {})
    tspec.pop("nodeName", None)
    ttl = as_map(job, "spec").get("ttl")
    if not spec.get("ttl") and not spec.get("expires") and ttl and pmj.ttl_seconds(job) > 0:
        spec["ttl"] = ttl
    node = str(as_map(pod, "spec").get("nodeName") or "")
    if node:
        _skip_node(tspec, node)
    out["apiVersion"] = groups.RESERVATIONS.api_version
    out["kind"] = groups.RESERVATIONS.kind
    return out


def reference(r: Obj) -> dict[str, str]:
    return pmj.reference(r, groups.RESERVATIONS.kind, groups.RESERVATIONS.api_version)


def unschedulable_message(r: Obj) -> str | None:
    """The scheduler's reason the reservation could not be placed, if it said one."""
    c = condition(r, rsv.CONDITION_SCHEDULED)
    if c is not None and c.get("reason") == rsv.REASON_UNSCHEDULABLE:
        return str(c.get("message") or "")
    return None


def is_scheduled(r: Obj) -> bool:
    c = condition(r, rsv.CONDITION_SCHEDULED)
    return (
        bool(rsv.node_of(r))
        and c is not None
        and c.get("status") == "True"
        and c.get("reason") == rsv.REASON_SCHEDULED
    )


def is_waiting(r: Obj) -> bool:
    """Not decided yet (Koordinator's ``IsReservationPending``: no phase or Pending)."""
    return rsv.phase_of(r) in ("", rsv.Phase.PENDING)


def bound_pod(r: Obj) -> Mapping[str, Any] | None:
    """The first owner placed in the reservation."""
    owners = [o for o in as_list(as_map(r, "status"), "currentOwners") if isinstance(o, Mapping)]
    return owners[0] if owners else None


def for_pending_pod(r: Obj) -> bool:
    """Reserved for one pod by reference (a pod that was never scheduled), not for a workload."""
    return any(
        isinstance(o, Mapping)
        and o.get("object") is not None
        and not o.get("controller")
        and not o.get("labelSelector")
        for o in as_list(as_map(r, "spec"), "owners")
    )
