"""Koordinator's PodMigrationJob (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped): one pod to move,
how (``ReservationFirst``: reserve room for its replacement first; ``EvictDirectly``), within what time,
and where the move is (phase, conditions, the node reserved and the pod that took the room). Pure: stdlib
only; objects are the API's JSON as mappings, changed only through the helpers that return new values.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from koordshared.apis.core.pod import as_list, as_map, condition
from koordshared.apis.core.pod import with_condition as core_with_condition
from koordshared.apis.meta.quantity import format_time, parse_duration, parse_time
from koordshared.runtime.errors import InvalidValue

KIND = "PodMigrationJob"
API_VERSION = "scheduling.koordinator.sh/v1alpha1"

ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER = "koordinator.sh/evict-trigger"
ANNOTATION_CREATED_BY = "koordinator.sh/job-created-by"
"""The descheduler instance that made the job (a user's job has none)."""
ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
LABEL_CREATED_BY = "app.kubernetes.io/created-by"
CREATOR = "koord-descheduler"


class Mode(enum.StrEnum):
    RESERVATION_FIRST = "ReservationFirst"
    EVICT_DIRECTLY = "EvictDirectly"


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ABORTED = "Aborted"


ACTIVE_PHASES = frozenset({"", Phase.PENDING, Phase.RUNNING})


class Condition(enum.StrEnum):
    RESERVATION_CREATED = "ReservationCreated"
    RESERVATION_SCHEDULED = "ReservationScheduled"
    PREEMPTION = "Preemption"
    EVICTION = "Eviction"
    POD_SCHEDULED = "PodScheduled"
    POD_BOUND_RESERVATION = "PodBoundReservation"
    BOUND_POD_READY = "BoundPodReady"
    RESERVATION_BOUND = "ReservationBound"


class Reason(enum.StrEnum):
    TIMEOUT = "Timeout"
    FAILED_CREATE_RESERVATION = "FailedCreateReservation"
    RESERVATION_EXPIRED = "ReservationExpired"
    UNSCHEDULABLE = "Unschedulable"
    FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
    MISSING_POD = "MissingPod"
    MISSING_RESERVATION = "MissingReservation"
    INVALID_POD_REF = "InvalidPodRef"
    EVICTING = "Evicting"
    FAILED_EVICT = "FailedEvict"
    EVICT_COMPLETE = "EvictComplete"
    WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"
    WAIT_FOR_BOUND_POD_READY = "WaitForBoundPodReady"


# ---- reading a job -----------------------------------------------------------------------------------


def name_of(job: Mapping[str, Any]) -> str:
    return str(as_map(job, "metadata").get("name") or "")


def uid_of(job: Mapping[str, Any]) -> str:
    return str(as_map(job, "metadata").get("uid") or "")


def annotations_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(job, "metadata"), "annotations")


def phase_of(job: Mapping[str, Any]) -> str:
    return str(as_map(job, "status").get("phase") or "")


def is_active(job: Mapping[str, Any]) -> bool:
    """Pending (or no phase yet) or Running: the move is not over."""
    return phase_of(job) in ACTIVE_PHASES


def passed_arbitration(job: Mapping[str, Any]) -> bool:
    return annotations_of(job).get(ANNOTATION_PASSED_ARBITRATION) == "true"


def paused(job: Mapping[str, Any]) -> bool:
    return as_map(job, "spec").get("paused") is True


def mode_of(job: Mapping[str, Any], default: str) -> str:
    return str(as_map(job, "spec").get("mode") or default)


def pod_ref(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(job, "spec"), "podRef")


def pod_key(job: Mapping[str, Any]) -> str:
    """``namespace/name`` of the pod to move (``""`` when the job does not name both)."""
    ref = pod_ref(job)
    ns, name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
    return f"{ns}/{name}" if ns and name else ""


def reservation_ref(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(as_map(job, "spec"), "reservationOptions"), "reservationRef")


def ttl_seconds(job: Mapping[str, Any]) -> float:
    """``spec.ttl`` in seconds (0: none); an unparsable TTL raises :class:`InvalidValue`."""
    raw = as_map(job, "spec").get("ttl")
    if raw in (None, "", "0", "0s"):
        return 0.0
    if not isinstance(raw, str):
        raise InvalidValue("spec.ttl", raw, "want a duration such as 5m")
    return parse_duration(raw)


def created_at(job: Mapping[str, Any]) -> float | None:
    return parse_time(as_map(job, "metadata").get("creationTimestamp"))


def trigger_and_reason(job: Mapping[str, Any]) -> tuple[str, str]:
    """Who asked for the move and why (the reason falls back to the trigger, then ``NotSet``)."""
    notes = annotations_of(job)
    trigger = str(notes.get(ANNOTATION_EVICT_TRIGGER) or "")
    return trigger, str(notes.get(ANNOTATION_EVICT_REASON) or trigger or "NotSet")


# ---- writing a job -----------------------------------------------------------------------------------


def with_condition(
    status: Mapping[str, Any], kind: str, state: str, now: float, reason: str = "", message: str = ""
) -> dict[str, Any] | None:
    """``status`` with the condition ``kind`` set, and ``status``/``reason``/``message`` of the job
    following it (Koordinator's ``updateCondition``); ``None`` when nothing changes. The transition time
    is kept while the condition's status stays the same."""
    new: dict[str, Any] = {"type": kind, "status": state, "lastTransitionTime": format_time(now)}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    old = condition({"status": status}, kind)
    if (
        old is not None
        and old.get("status") == state
        and all(old.get(k, "") == new.get(k, "") for k in ("reason", "message"))
    ):
        return None
    out = dict(status)
    out.update(
        conditions=core_with_condition(as_list(status, "conditions"), new),
        status=kind,
        reason=reason,
        message=message,
    )
    return out


def new_job(
    name: str,
    pod: Mapping[str, Any],
    *,
    mode: str,
    ttl: str,
    trigger: str,
    reason: str,
    created_by: str,
    delete_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The job the descheduler creates for one move of ``pod`` (Koordinator's ``CreatePodMigrationJob``)."""
    meta = as_map(pod, "metadata")
    spec: dict[str, Any] = {
        "podRef": {
            "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""),
            "uid": str(meta.get("uid") or ""),
        },
        "mode": mode,
    }
    if ttl:
        spec["ttl"] = ttl
    if delete_options:
        spec["deleteOptions"] = dict(delete_options)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "annotations": {
                ANNOTATION_EVICT_REASON: reason,
                ANNOTATION_EVICT_TRIGGER: trigger,
                ANNOTATION_CREATED_BY: created_by,
            },
        },
        "spec": spec,
        "status": {"phase": Phase.PENDING.value},
    }


def reference(obj: Mapping[str, Any], kind: str, api_version: str) -> dict[str, str]:
    """An ``ObjectReference`` to ``obj`` (empty fields left out)."""
    meta = as_map(obj, "metadata")
    ref = {
        "kind": kind,
        "apiVersion": api_version,
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
    }
    return {k: v for k, v in ref.items() if v}
