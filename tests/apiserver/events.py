"""One Event store for ``v1`` and ``events.k8s.io/v1``, as in kube-apiserver where both are versions of
the same object (``pkg/apis/events/v1/conversion.go``).

Events are stored in the core ``v1`` shape; an ``events.k8s.io/v1`` request is converted on the way in
and every answer (get, list, watch) on the way out: ``regarding`` is ``involvedObject``, ``note`` is
``message``, ``reportingController`` is ``reportingComponent``, and the ``deprecated*`` fields are the core
``source``/``firstTimestamp``/``lastTimestamp``/``count``. A write through ``events.k8s.io/v1`` must also
carry ``eventTime``, a Normal or Warning ``type`` and, with a ``series``, a count of at least 2 and its
``lastObservedTime`` (``ValidateEventCreate``/``validateV1EventSeries`` for that version). Field
selectors of ``events.k8s.io/v1`` name the new fields (``regarding.kind``, ``reportingController``) and
select the stored ones, so ``--field-selector regarding.kind=Pod`` and ``involvedObject.kind=Pod`` find
the same Events.
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
# The field selector labels of events.k8s.io/v1 and the stored (core) fields they select
# (``AddFieldLabelConversionsForEvent``); any other label is a 400.
FIELD_LABELS = {
    "metadata.name": "metadata.name",
    "metadata.namespace": "metadata.namespace",
    "reason": "reason",
    "type": "type",
    "reportingController": "reportingComponent",
    **{f"regarding.{f}": f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid")},
    **{f"regarding.{f}": f"involvedObject.{f}" for f in ("apiVersion", "resourceVersion", "fieldPath")},
}


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
    series = obj.get("series")
    if isinstance(series, dict):  # validateV1EventSeries
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            causes.append(("series.count", "should be at least 2", "Invalid"))
        if not series.get("lastObservedTime"):
            causes.append(("series.lastObservedTime", "", "Required"))
    if causes:
        raise status.invalid("Event", GROUP, (obj.get("metadata") or {}).get("name", ""), causes)
    return stored_shape(rt, obj)


def stored_shape(rt: ResourceType, obj: Obj) -> Obj:
    """``obj`` as presented by ``rt`` in the stored (core) shape, unchecked: what the type's printer reads
    (kube-apiserver prints both versions from the one internal Event)."""
    if rt.group != GROUP or rt.plural != "events":
        return obj
    return _rename(obj, _RENAMED, "v1")


def from_storage(rt: ResourceType, obj: Obj) -> Obj:
    """``obj`` (stored form) as ``rt`` presents it."""
    if rt.group != GROUP or rt.plural != "events":
        return obj
    return _rename(obj, _BACK, f"{GROUP}/v1")


def storage_api_version(rt: ResourceType) -> str:
    """The apiVersion objects of ``rt`` are stored under."""
    return "v1" if rt.key == ("", "events") else rt.api_version
