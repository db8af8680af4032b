"""One Event store for ``v1`` and ``events.k8s.io/v1``, as in kube-apiserver where both are versions of
the same object (``pkg/apis/events/v1/conversion.go``).

Events are stored in the core ``v1`` shape; an ``events.k8s.io/v1`` request is converted on the way in
and every answer (get, list, watch) on the way out: ``regarding`` is ``involvedObject``, ``note`` is
``message``, ``reportingController`` is ``reportingComponent``, and the ``deprecated*`` fields are the core
``source``/``firstTimestamp``/``lastTimestamp``/``count``. A write through ``events.k8s.io/v1`` must also
carry ``eventTime`` and a Normal or Warning ``type`` (``ValidateEventCreate`` for that version).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver import status
from tests.apiserver.resources import ResourceType

Obj = dict[str, Any]
GROUP = "events.k8s.io"
# events.k8s.io/v1 name -> core v1 name
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_BACK = {v: k for k, v in _RENAMED.items()}


def _rename(obj: Obj, names: dict[str, str], api_version: str) -> Obj:
    out = {names.get(k, k): copy.deepcopy(v) for k, v in obj.items()}
    out["apiVersion"] = api_version
    return out


def to_storage(rt: ResourceType, obj: Obj) -> Obj:
    """The stored form of ``obj`` as written through ``rt``."""
    if rt.group != GROUP or rt.plural != "events":
        return obj
    causes: list[status.Cause] = []
    if not obj.get("eventTime"):
        causes.append(("eventTime", "", "Required"))
    if obj.get("type") not in ("Normal", "Warning"):
        causes.append(("type", f"{obj.get('type')!r}: supported values: Normal, Warning", "NotSupported"))
    if causes:
        raise status.invalid("Event", GROUP, (obj.get("metadata") or {}).get("name", ""), causes)
    return _rename(obj, _RENAMED, "v1")


def from_storage(rt: ResourceType, obj: Obj) -> Obj:
    """``obj`` (stored form) as ``rt`` presents it."""
    if rt.group != GROUP or rt.plural != "events":
        return obj
    return _rename(obj, _BACK, f"{GROUP}/v1")


def storage_api_version(rt: ResourceType) -> str:
    """The apiVersion objects of ``rt`` are stored under."""
    return "v1" if rt.key == ("", "events") else rt.api_version
