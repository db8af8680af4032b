"""A Reservation's status transitions, as JSON merge patches of its ``status`` subresource (Koordinator's
``SetReservationAvailable``, ``SetReservationUnschedulable``, ``SetReservationExpired``,
``SetReservationSucceeded`` and the controller's owners sync). Each carries the object's
``resourceVersion``: a transition computed from a stale copy is refused (409), not applied over a newer
one (Koordinator updates the status with ``UpdateStatus``, which has the same precondition).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.meta.quantity import format_bytes, format_decimal, format_milli, format_time
from koordshared.apis.scheduling import reservation as rsv

Obj = Mapping[str, Any]
_BYTES = ("memory", "ephemeral-storage")


def quantities(resources: Mapping[str, int]) -> dict[str, str]:
    """Scheduler units back to a ResourceList as Kubernetes prints one."""
    out = {}
    for name, value in sorted(resources.items()):
        if name == "cpu":
            out[name] = format_milli(value)
        elif name in _BYTES or name.startswith("hugepages-"):
            out[name] = format_bytes(value)
        else:
            out[name] = format_decimal(value)
    return out


def _patch(r: Obj, status: Mapping[str, Any]) -> dict[str, Any]:
    meta = as_map(r, "metadata")
    precondition = {k: meta[k] for k in ("uid", "resourceVersion") if meta.get(k)}
    out: dict[str, Any] = {"status": dict(status)}
    if precondition:
        out["metadata"] = precondition
    return out


def _condition(kind: str, status: str, reason: str, now: float, message: str = "") -> dict[str, Any]:
    out = {
        "type": kind,
        "status": status,
        "reason": reason,
        "lastProbeTime": format_time(now),
        "lastTransitionTime": format_time(now),
    }
    if message:
        out["message"] = message
    return out


def _conditions(r: Obj) -> list[dict[str, Any]]:
    return [dict(c) for c in as_list(as_map(r, "status"), "conditions") if isinstance(c, Mapping)]


def available(r: Obj, node: str, allocatable: Mapping[str, int], now: float) -> dict[str, Any]:
    return _patch(
        r,
        {
            "phase": rsv.Phase.AVAILABLE.value,
            "nodeName": node,
            "allocatable": quantities(allocatable),
            "conditions": [
                _condition(rsv.CONDITION_SCHEDULED, "True", rsv.REASON_SCHEDULED, now),
                _condition(rsv.CONDITION_READY, "True", rsv.REASON_AVAILABLE, now),
            ],
        },
    )


def unschedulable(r: Obj, message: str, now: float) -> dict[str, Any] | None:
    """The patch that records why the reservation could not be placed (``None``: nothing to change)."""
    conditions = _conditions(r)
    for c in conditions:
        if c.get("type") != rsv.CONDITION_SCHEDULED:
            continue
        if c.get("status") == "True":
            return None  # placed already: a late failure of an old cycle changes nothing
        if c.get("reason") == rsv.REASON_UNSCHEDULABLE and c.get("message") == message:
            return None
        c.update(reason=rsv.REASON_UNSCHEDULABLE, message=message, lastProbeTime=format_time(now))
        return _patch(r, {"conditions": conditions})
    conditions.append(_condition(rsv.CONDITION_SCHEDULED, "False", rsv.REASON_UNSCHEDULABLE, now, message))
    return _patch(r, {"conditions": conditions})


def expired(r: Obj, now: float) -> dict[str, Any]:
    conditions = _conditions(r)
    for c in conditions:
        if c.get("type") == rsv.CONDITION_READY:
            if c.get("status") == "True":
                c.clear()
                c.update(_condition(rsv.CONDITION_READY, "False", rsv.REASON_EXPIRED, now))
            else:
                c.update(reason=rsv.REASON_EXPIRED, lastProbeTime=format_time(now))
            break
    else:
        conditions.append(_condition(rsv.CONDITION_READY, "False", rsv.REASON_EXPIRED, now))
    return _patch(r, {"phase": rsv.Phase.FAILED.value, "conditions": conditions})


def owners(
    r: Obj, current: Sequence[Mapping[str, str]], allocated: Mapping[str, int], now: float
) -> dict[str, Any]:
    """``currentOwners`` and ``allocated``; Succeeded too when the reservation is allocate-once."""
    status: dict[str, Any] = {"currentOwners": [dict(o) for o in current] or None}
    status["allocated"] = quantities(allocated) or None
    if rsv.allocate_once(r):
        conditions = _conditions(r)
        for c in conditions:
            if c.get("type") == rsv.CONDITION_READY:
                c.update(status="False", reason=rsv.REASON_SUCCEEDED, lastProbeTime=format_time(now))
                break
        else:
            conditions.append(_condition(rsv.CONDITION_READY, "False", rsv.REASON_SUCCEEDED, now))
        status["phase"] = rsv.Phase.SUCCEEDED.value
        status["conditions"] = conditions
    return _patch(r, status)


def ended_at(r: Obj) -> str:
    """When an Expired or Succeeded reservation ended (the time its garbage collection counts from):
    the Expired condition's transition, the Succeeded one's last probe; ``""`` when unknown."""
    for c in as_list(as_map(r, "status"), "conditions"):
        if not isinstance(c, Mapping):
            continue
        if rsv.is_expired(r) and c.get("reason") == rsv.REASON_EXPIRED:
            return str(c.get("lastTransitionTime") or "")
        if rsv.phase_of(r) == rsv.Phase.SUCCEEDED and c.get("reason") == rsv.REASON_SUCCEEDED:
            return str(c.get("lastProbeTime") or "")
    return ""
