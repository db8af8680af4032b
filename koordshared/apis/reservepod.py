"""The reserve pod: a Reservation as the scheduler sees it, a pod built from ``spec.template`` that exists
only inside the scheduler (Koordinator's ``NewReservePod``, ``pkg/util/reservation/reservation.go``). A
pending reservation's reserve pod is scheduled like any pod; an available one's holds its room on its
node, as a bound pod would. Pure: stdlib only.

- name: the reservation's UID (unique beside real pods), namespace: the template's or ``default``, UID: the
  reservation's; labels and annotations: the template's with the reservation's over them, plus
  ``scheduling.koordinator.sh/reserve-pod: "true"`` and ``.../reservation-name``;
- a ``template.spec.nodeName`` moves to the annotation ``.../reservation-node`` (only that node will do),
  and ``spec.nodeName`` is the node the reservation was placed on;
- priority: the template's, else the reservation's label ``koordinator.sh/priority``, else the largest
  int32 (a reservation is never preempted for a pod);
- once available, it requests ``status.allocatable`` (what was reserved, which may differ from the
  template).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from koordshared.apis import reservation as rsv
from koordshared.apis.pod import as_map
from koordshared.apis.resources import parse_resource_list, pod_requests_list

ANNOTATION_RESERVE_POD = f"{rsv.DOMAIN}/reserve-pod"
ANNOTATION_RESERVATION_NAME = f"{rsv.DOMAIN}/reservation-name"
ANNOTATION_RESERVATION_NODE = f"{rsv.DOMAIN}/reservation-node"
MAX_PRIORITY = 2**31 - 1
FAKE_CONTAINER = "__internal_fake_container__"


def is_reserve_pod(pod: Mapping[str, Any]) -> bool:
    return as_map(as_map(pod, "metadata"), "annotations").get(ANNOTATION_RESERVE_POD) == "true"


def reservation_name(pod: Mapping[str, Any]) -> str:
    """The reservation a reserve pod stands for (``""`` for any other pod)."""
    if not is_reserve_pod(pod):
        return ""
    return str(as_map(as_map(pod, "metadata"), "annotations").get(ANNOTATION_RESERVATION_NAME) or "")


def pinned_node(pod: Mapping[str, Any]) -> str:
    """The node a reserve pod must go to (the template named it), or ``""``."""
    return str(as_map(as_map(pod, "metadata"), "annotations").get(ANNOTATION_RESERVATION_NODE) or "")


def reserve_pod(r: Mapping[str, Any]) -> dict[str, Any]:
    template = rsv.template_of(r)
    meta_in = as_map(r, "metadata")
    tmeta = as_map(template, "metadata")
    spec: dict[str, Any] = copy.deepcopy(dict(as_map(template, "spec")))
    labels = {**as_map(tmeta, "labels"), **as_map(meta_in, "labels")}
    annotations = {
        **as_map(tmeta, "annotations"),
        **as_map(meta_in, "annotations"),
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: rsv.name_of(r),
    }
    pinned = spec.pop("nodeName", None)
    if pinned:
        annotations[ANNOTATION_RESERVATION_NODE] = str(pinned)
    if rsv.node_of(r):
        spec["nodeName"] = rsv.node_of(r)
    if not isinstance(spec.get("priority"), int):
        spec["priority"] = _label_priority(labels.get(rsv.LABEL_POD_PRIORITY))
    spec["schedulerName"] = rsv.scheduler_of(r)
    meta: dict[str, Any] = {
        "name": rsv.uid_of(r),
        "namespace": str(tmeta.get("namespace") or "default"),
        "uid": rsv.uid_of(r),
        "labels": labels,
        "annotations": annotations,
    }
    if meta_in.get("creationTimestamp"):
        meta["creationTimestamp"] = meta_in["creationTimestamp"]
    if meta_in.get("deletionTimestamp"):
        meta["deletionTimestamp"] = meta_in["deletionTimestamp"]
    phase = rsv.phase_of(r) if rsv.is_terminated(r) else "Pending"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}
    if rsv.is_available(r):
        allocatable = as_map(as_map(r, "status"), "allocatable")
        if allocatable and parse_resource_list(allocatable) != pod_requests_list(pod):
            _request_exactly(spec, allocatable)
    return pod


def _label_priority(raw: Any) -> int:
    try:
        value = int(str(raw)) if raw not in (None, "") else MAX_PRIORITY
    except ValueError:
        return MAX_PRIORITY
    return value if -(2**31) <= value <= MAX_PRIORITY else MAX_PRIORITY


def _request_exactly(spec: dict[str, Any], allocatable: Mapping[str, Any]) -> None:
    """What was reserved differs from the template (the scheduler or a resize changed it): the reserve pod
    requests exactly ``allocatable``, through one container of its own (Koordinator's
    ``UpdateReservePodWithAllocatable``)."""
    spec.pop("overhead", None)
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                c["resources"] = {}
    wanted = {str(k): v for k, v in allocatable.items()}
    spec.setdefault("containers", []).append(
        {"name": FAKE_CONTAINER, "resources": {"requests": dict(wanted), "limits": dict(wanted)}}
    )
