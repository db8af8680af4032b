"""Koordinator's Reservation (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped): the spec as users
write it, who may use it (owners), what a pod says about reservations (annotations and labels), the
phases, and the reserve pod (:func:`reserve_pod`): the Reservation as the scheduler sees it, a pod that
exists only inside the scheduler (Koordinator's ``NewReservePod``). Pure: stdlib only.

``spec.owners`` is a disjunction (a pod may use the reservation when it matches one owner); ``spec.ttl``
(default 24h) or ``spec.expires`` end it; ``spec.allocateOnce`` (default true) ends it at the first owner
bound. A pending reservation's reserve pod is scheduled like any pod; an available one's holds its room on
its node, as a bound pod would.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordshared.apis.core.node import term_matches, tolerates
from koordshared.apis.core.pod import as_list, as_map, condition, str_map
from koordshared.apis.core.resources import parse_resource_list, pod_requests_list
from koordshared.apis.meta.quantity import parse_duration, parse_time
from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.runtime.errors import InvalidValue

DOMAIN = "scheduling.koordinator.sh"
ANNOTATION_RESERVATION_ALLOCATED = f"{DOMAIN}/reservation-allocated"
ANNOTATION_RESERVATION_AFFINITY = f"{DOMAIN}/reservation-affinity"
ANNOTATION_RESTRICTED_OPTIONS = f"{DOMAIN}/reservation-restricted-options"
ANNOTATION_EXACT_MATCH = f"{DOMAIN}/exact-match-reservation"
LABEL_RESERVATION_IGNORED = f"{DOMAIN}/reservation-ignored"
LABEL_RESERVATION_ORDER = f"{DOMAIN}/reservation-order"
"""On a Reservation: lower is preferred (0 or absent: no order, the reservation is scored instead)."""
ANNOTATION_NODE_RESERVED = "node.koordinator.sh/reservation"
"""On a Reservation: resources kept inside it from its owners (Koordinator's node reservation shape)."""
LABEL_POD_PRIORITY = "koordinator.sh/priority"
"""On a Reservation without ``template.spec.priority``: the priority of its reserve pod."""

DEFAULT_TTL = 24 * 3600.0
DEFAULT_SCHEDULER = "default-scheduler"


class Phase(enum.StrEnum):
    PENDING = "Pending"
    AVAILABLE = "Available"
    SUCCEEDED = "Succeeded"
    WAITING = "Waiting"
    FAILED = "Failed"


class AllocatePolicy(enum.StrEnum):
    DEFAULT = ""
    """Deprecated; treated as Aligned, but cannot share a node with reservations of another policy."""
    ALIGNED = "Aligned"
    RESTRICTED = "Restricted"


CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_AVAILABLE = "Available"
REASON_SUCCEEDED = "Succeeded"
REASON_EXPIRED = "Expired"


# ---- the object ------------------------------------------------------------------------------------


def name_of(r: Mapping[str, Any]) -> str:
    return str(as_map(r, "metadata").get("name") or "")


def uid_of(r: Mapping[str, Any]) -> str:
    return str(as_map(r, "metadata").get("uid") or "")


def phase_of(r: Mapping[str, Any]) -> str:
    return str(as_map(r, "status").get("phase") or "")


def node_of(r: Mapping[str, Any]) -> str:
    return str(as_map(r, "status").get("nodeName") or "")


def template_of(r: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(r, "spec"), "template")


def scheduler_of(r: Mapping[str, Any]) -> str:
    return str(as_map(template_of(r), "spec").get("schedulerName") or DEFAULT_SCHEDULER)


def allocate_once(r: Mapping[str, Any]) -> bool:
    return as_map(r, "spec").get("allocateOnce") is not False


def allocate_policy(r: Mapping[str, Any]) -> str:
    return str(as_map(r, "spec").get("allocatePolicy") or "")


def is_available(r: Mapping[str, Any]) -> bool:
    return bool(node_of(r)) and phase_of(r) == Phase.AVAILABLE


def is_terminated(r: Mapping[str, Any]) -> bool:
    return phase_of(r) in (Phase.SUCCEEDED, Phase.FAILED)


def is_pending(r: Mapping[str, Any]) -> bool:
    """Not placed yet and not over: its reserve pod waits in the scheduling queue."""
    return not node_of(r) and not is_terminated(r)


def is_expired(r: Mapping[str, Any]) -> bool:
    """Failed because its time ran out (or its node went away)."""
    if phase_of(r) != Phase.FAILED:
        return False
    ready = condition(r, CONDITION_READY)
    return ready is not None and ready.get("status") == "False" and ready.get("reason") == REASON_EXPIRED


def ttl_seconds(r: Mapping[str, Any]) -> float:
    """``spec.ttl`` in seconds (24h when absent, the CRD's default; 0: no expiry); an unparsable TTL
    raises :class:`InvalidValue`."""
    raw = as_map(r, "spec").get("ttl")
    if raw is None or raw == "":
        return DEFAULT_TTL
    if not isinstance(raw, str):
        raise InvalidValue("spec.ttl", raw, "want a duration such as 24h")
    return 0.0 if raw.strip() == "0" else parse_duration(raw)


def expires_at(r: Mapping[str, Any], created: float) -> float | None:
    """When the reservation expires (wall seconds): ``spec.expires`` first, else creation plus the TTL;
    ``None`` when it never does."""
    raw = as_map(r, "spec").get("expires")
    if raw:
        when = parse_time(raw)
        if when is None:
            raise InvalidValue("spec.expires", raw, "want an RFC 3339 time")
        return when
    ttl = ttl_seconds(r)
    return None if ttl == 0 else created + ttl


def problems(r: Mapping[str, Any]) -> list[str]:
    """Why the scheduler cannot use the reservation as written (Koordinator's ``ValidateReservation`` and
    the parse errors it logs): empty when it can."""
    out = []
    spec = as_map(r, "spec")
    if not isinstance(spec.get("template"), Mapping):
        out.append("the reservation misses the template spec")
    if not as_list(spec, "owners"):
        out.append("the reservation misses the owner spec")
    else:
        _, error = parse_owners(spec["owners"])
        if error:
            out.append(error)
    if allocate_policy(r) not in AllocatePolicy.__members__.values():
        out.append(f"spec.allocatePolicy: {allocate_policy(r)!r} unknown; want Aligned or Restricted")
    try:
        created = parse_time(as_map(r, "metadata").get("creationTimestamp")) or 0.0
        expires_at(r, created)
    except InvalidValue as err:
        out.append(str(err))
    return out


# ---- owners ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerMatcher:
    """One ``spec.owners[]`` entry: every field given must match the pod."""

    object: Mapping[str, Any] | None = None
    controller: Mapping[str, Any] | None = None
    selector: LabelSelector | None = None

    def matches(self, pod: Mapping[str, Any]) -> bool:
        meta = as_map(pod, "metadata")
        if self.object is not None and not _object_matches(meta, self.object):
            return False
        if self.controller is not None and not _controller_matches(meta, self.controller):
            return False
        return self.selector is None or self.selector.matches(as_map(meta, "labels"))


def _object_matches(meta: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    # Only pods are compared, so kind, resourceVersion and fieldPath are ignored (as Koordinator does);
    # a pod's apiVersion is v1 whether or not the object says so (a listed one does not).
    have = {
        "uid": meta.get("uid"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "apiVersion": "v1",
    }
    return all(not ref.get(k) or ref.get(k) == v for k, v in have.items())


def _controller_matches(meta: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    if ref.get("namespace") and ref.get("namespace") != meta.get("namespace"):
        return False
    for owner in as_list(meta, "ownerReferences"):
        if not isinstance(owner, Mapping):
            continue
        if ref.get("controller") is not None and ref.get("controller") != owner.get("controller"):
            continue
        if all(not ref.get(k) or ref.get(k) == owner.get(k) for k in ("uid", "name", "kind", "apiVersion")):
            return True
    return False


def parse_owners(raw: Any) -> tuple[tuple[OwnerMatcher, ...], str]:
    """The owners and the first problem with them (``""``: none; a bad owner matches no pod)."""
    if not isinstance(raw, list):
        return (), "spec.owners: want a list of owners"
    out = []
    for i, owner in enumerate(raw):
        if not isinstance(owner, Mapping):
            return (), f"spec.owners[{i}]: want an object"
        selector = None
        if owner.get("labelSelector") is not None:
            selector = parse_selector(owner["labelSelector"])
            if selector.error:
                return (), f"spec.owners[{i}].labelSelector: {selector.error}"
        obj, ctl = owner.get("object"), owner.get("controller")
        if (obj is not None and not isinstance(obj, Mapping)) or (
            ctl is not None and not isinstance(ctl, Mapping)
        ):
            return (), f"spec.owners[{i}]: object and controller must be objects"
        out.append(OwnerMatcher(obj, ctl, selector))
    return tuple(out), ""


# ---- what a pod says ---------------------------------------------------------------------------------


def is_ignored(pod: Mapping[str, Any]) -> bool:
    return as_map(as_map(pod, "metadata"), "labels").get(LABEL_RESERVATION_IGNORED) == "true"


def allocated_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(name, uid)`` of the reservation the pod was placed in (``reservation-allocated``), if any."""
    raw = as_map(as_map(pod, "metadata"), "annotations").get(ANNOTATION_RESERVATION_ALLOCATED)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, Mapping) or not doc.get("uid"):
        return None
    return str(doc.get("name") or ""), str(doc["uid"])


def allocated_annotation(name: str, uid: str) -> str:
    return json.dumps({"name": name, "uid": uid}, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ReservationAffinity:
    """``reservation-affinity``: the pod must use a reservation that matches (Koordinator's
    ``RequiredReservationAffinity``)."""

    name: str = ""
    selector: Mapping[str, str] | None = None
    terms: tuple[Mapping[str, Any], ...] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def matches(self, reservation_name: str, labels: Mapping[str, str]) -> bool:
        """The selector and the terms, over ``labels`` (the reservation's over its node's) and the
        reservation's name as the object name."""
        if self.selector and any(labels.get(k) != v for k, v in self.selector.items()):
            return False
        fake = {"metadata": {"name": reservation_name, "labels": labels}}
        return self.terms is None or any(term_matches(t, fake) for t in self.terms)

    def untolerated(self, taints: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        """The first ``NoSchedule``/``NoExecute`` taint of the reservation no toleration tolerates."""
        for taint in taints:
            if taint.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            if not any(tolerates(t, taint) for t in self.tolerations):
                return taint
        return None

    @property
    def tolerates_unschedulable(self) -> bool:
        taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        return any(tolerates(t, taint) for t in self.tolerations)


def reservation_affinity(pod: Mapping[str, Any]) -> ReservationAffinity | None:
    """The pod's reservation affinity (``None``: it has none); a malformed one raises
    :class:`InvalidValue`."""
    annotations = as_map(as_map(pod, "metadata"), "annotations")
    if ANNOTATION_RESERVATION_AFFINITY not in annotations:
        return None
    raw = annotations[ANNOTATION_RESERVATION_AFFINITY]
    doc = _json_object(raw, ANNOTATION_RESERVATION_AFFINITY) if raw else {}
    selector = doc.get("reservationSelector")
    if selector is not None and not isinstance(selector, Mapping):
        raise InvalidValue(ANNOTATION_RESERVATION_AFFINITY, selector, "reservationSelector must be a map")
    required = doc.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if required is not None:
        if not isinstance(required, Mapping):
            raise InvalidValue(
                ANNOTATION_RESERVATION_AFFINITY, required, "its required selector must be an object"
            )
        terms = tuple(t for t in as_list(required, "reservationSelectorTerms") if isinstance(t, Mapping))
    tolerations = tuple(t for t in as_list(doc, "tolerations") if isinstance(t, Mapping))
    return ReservationAffinity(
        str(doc.get("name") or ""), str_map(selector) if selector else None, terms, tolerations
    )


def _json_object(raw: Any, what: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(raw) if isinstance(raw, str) else None
    except ValueError as err:
        raise InvalidValue(what, raw, f"not JSON: {err}") from err
    if not isinstance(doc, Mapping):
        raise InvalidValue(what, raw, "want a JSON object")
    return doc


def restricted_resources(r: Mapping[str, Any], allocatable: Sequence[str]) -> tuple[str, ...]:
    """The reserved resources a Restricted reservation limits its owners to: those the
    ``reservation-restricted-options`` annotation names among ``allocatable`` (all of them when it names
    none of them)."""
    raw = as_map(as_map(r, "metadata"), "annotations").get(ANNOTATION_RESTRICTED_OPTIONS)
    if not raw:
        return tuple(allocatable)
    named = {str(x) for x in as_list(_json_object(raw, ANNOTATION_RESTRICTED_OPTIONS), "resources")}
    picked = tuple(n for n in allocatable if n in named)
    return picked or tuple(allocatable)


def exact_match_resources(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The resources whose request must equal what a reservation holds (``exact-match-reservation``)."""
    raw = as_map(as_map(pod, "metadata"), "annotations").get(ANNOTATION_EXACT_MATCH)
    if not raw:
        return ()
    return tuple(str(x) for x in as_list(_json_object(raw, ANNOTATION_EXACT_MATCH), "resourceNames"))


def exact_match(requests: Mapping[str, int], allocatable: Mapping[str, int], names: Sequence[str]) -> bool:
    """Koordinator's ``ExactMatchReservation``: for each name, both absent (which ends the check as a
    match) or both present and equal."""
    for n in names:
        if n not in allocatable or n not in requests:
            return n not in allocatable and n not in requests
        if allocatable[n] != requests[n]:
            return False
    return True


ANNOTATION_RESERVE_POD = f"{DOMAIN}/reserve-pod"
ANNOTATION_RESERVATION_NAME = f"{DOMAIN}/reservation-name"
ANNOTATION_RESERVATION_NODE = f"{DOMAIN}/reservation-node"
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
    template = template_of(r)
    meta_in = as_map(r, "metadata")
    tmeta = as_map(template, "metadata")
    spec: dict[str, Any] = copy.deepcopy(dict(as_map(template, "spec")))
    labels = {**as_map(tmeta, "labels"), **as_map(meta_in, "labels")}
    annotations = {
        **as_map(tmeta, "annotations"),
        **as_map(meta_in, "annotations"),
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: name_of(r),
    }
    pinned = spec.pop("nodeName", None)
    if pinned:
        annotations[ANNOTATION_RESERVATION_NODE] = str(pinned)
    if node_of(r):
        spec["nodeName"] = node_of(r)
    if not isinstance(spec.get("priority"), int):
        spec["priority"] = _label_priority(labels.get(LABEL_POD_PRIORITY))
    spec["schedulerName"] = scheduler_of(r)
    meta: dict[str, Any] = {
        "name": uid_of(r),
        "namespace": str(tmeta.get("namespace") or "default"),
        "uid": uid_of(r),
        "labels": labels,
        "annotations": annotations,
    }
    if meta_in.get("creationTimestamp"):
        meta["creationTimestamp"] = meta_in["creationTimestamp"]
    if meta_in.get("deletionTimestamp"):
        meta["deletionTimestamp"] = meta_in["deletionTimestamp"]
    phase = phase_of(r) if is_terminated(r) else "Pending"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}
    if is_available(r):
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
