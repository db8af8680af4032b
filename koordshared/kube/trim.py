"""Trimming of cached objects for the cluster processes' informers (client-go's ``SetTransform``).

kube-scheduler and the descheduler keep full objects; our processes keep what their plugins read, so that
100 000 pods fit in a few hundred MiB. :func:`slim_pod` drops ``metadata.managedFields``, the
``last-applied-configuration`` annotation, container fields other than name, image, resources, ports,
restartPolicy and resizePolicy, ``spec.volumes`` (unless asked to keep their kinds and claim names),
ephemeral containers, and status fields other than phase, conditions, qosClass, nominatedNodeName and
startTime.
:func:`slim_node` drops ``managedFields`` and ``status.images``. Every result has its keys and short
strings interned (:func:`compact`), but for UIDs and resourceVersions, which no two objects share.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

Obj = Mapping[str, Any]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_CONTAINER_KEEP = ("name", "image", "resources", "ports", "restartPolicy", "resizePolicy")
_POD_STATUS_KEEP = ("phase", "conditions", "qosClass", "nominatedNodeName", "startTime")


INTERN_MAX = 32
"""Strings up to this length are interned: keys always repeat, and so do short values (phases, QoS
classes, namespaces, label values, resource names), while UIDs and long names rarely do."""


_OWN_VALUES = frozenset({"uid", "resourceVersion"})
"""Keys whose values are one object's own: interning them would only grow the interned table."""


def compact(obj: Any) -> Any:
    """``obj`` rebuilt with interned keys and short values. Every watch event is decoded on its own, so
    without this each of 100 000 cached pods carries its own copy of every key: half the memory. A shared
    value (:func:`share`) is compact already and kept as it is."""
    t = type(obj)
    if t is str:  # decoded JSON: exact types, tested the cheap way first
        return sys.intern(obj) if len(obj) <= INTERN_MAX else obj
    if t is dict:
        own = _OWN_VALUES
        return {sys.intern(k) if type(k) is str else k: v if k in own else compact(v) for k, v in obj.items()}
    if t is list:
        return [compact(v) for v in obj]
    if t in _SCALARS or t in _SHARED_TYPES:
        return obj
    if isinstance(obj, dict):
        return {
            sys.intern(k) if isinstance(k, str) else k: v if k in _OWN_VALUES else compact(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [compact(v) for v in obj]
    if isinstance(obj, str) and len(obj) <= INTERN_MAX:
        return sys.intern(obj)
    return obj


class _SharedDict(dict[str, Any]):
    """A dict the sharing table can hold weakly (it forgets a value no cached object holds any more)."""

    __slots__ = ("__weakref__",)


class _SharedList(list[Any]):
    __slots__ = ("__weakref__",)


_SHARED_TYPES = (_SharedDict, _SharedList)
_SCALARS = (int, float, bool, type(None))
_shared: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()
_SHARED_META = ("labels", "annotations", "ownerReferences")


def share(value: Any) -> Any:
    """The one cached object equal to ``value`` (a compacted dict or list; anything else is returned as
    it is). Equal means equal JSON, so ``1`` and ``1.0`` or ``true`` stay apart."""
    if not isinstance(value, dict | list) or not value:
        return value
    if type(value) in _SHARED_TYPES:
        return value
    key = _key(value)
    with _shared_lock:
        got = _shared.get(key)
    if got is not None:
        return got
    # Compacted only when first seen: a template's fields, looked up by their JSON, are compacted once
    # for all the pods stamped from it (most of a watch event's cost was compacting them again).
    made = compact(value)
    made = _SharedDict(made) if isinstance(made, dict) else _SharedList(made)
    with _shared_lock:
        got = _shared.get(key)
        if got is None:
            got = _shared[key] = made
    return got


def _key(value: Any) -> str:
    """The sharing table's key of a decoded JSON value: its ``repr``, a third of ``json.dumps``'s cost
    and as exact (``1``, ``1.0`` and ``True`` differ; keys are strings, in their order)."""
    return repr(value)


def _shared_or_compact(value: Any) -> Any:
    got = share(value)
    return got if type(got) in _SHARED_TYPES else compact(got)


def _meta(raw: Any, shared: frozenset[str]) -> dict[str, Any]:
    """Compacted metadata without ``managedFields`` and the last-applied annotation; the ``shared``
    fields shared with their equals."""
    out: dict[str, Any] = {}
    if not isinstance(raw, Mapping):
        return out
    intern = sys.intern
    for k, v in raw.items():
        if k != "managedFields":
            out[intern(k)] = _meta_value(k, v, shared)
    return out


def _meta_value(k: str, v: Any, shared: frozenset[str]) -> Any:
    t = type(v)
    if k in _OWN_VALUES or t in _SCALARS:
        return v
    if t is str:
        return sys.intern(v) if len(v) <= INTERN_MAX else v
    if k == "annotations" and isinstance(v, Mapping) and LAST_APPLIED in v:
        v = {a: b for a, b in v.items() if a != LAST_APPLIED}
    return _shared_or_compact(v) if k in shared else compact(v)


def _containers(raw: Any) -> Any:
    if not isinstance(raw, list):
        return raw
    return [{k: c[k] for k in _CONTAINER_KEEP if k in c} if isinstance(c, Mapping) else c for c in raw]


def _volume_kind(volume: Obj) -> dict[str, Any]:
    """A volume reduced to its name and the key of its source (``emptyDir``, ``hostPath``...), whose
    content is dropped but for the claim a ``persistentVolumeClaim`` names: enough to tell local storage
    and claims apart, and to find the claim."""
    out: dict[str, Any] = {k: ({} if k != "name" else v) for k, v in volume.items()}
    claim = volume.get("persistentVolumeClaim")
    if isinstance(claim, Mapping) and "claimName" in claim:
        out["persistentVolumeClaim"] = {"claimName": claim["claimName"]}
    return out


_POD_META_SHARED = frozenset(("labels", "annotations", "ownerReferences"))
_SPEC_DROP = frozenset(("volumes", "ephemeralContainers"))
_CONTAINER_LISTS = frozenset(("containers", "initContainers"))


def _pod_spec(spec: Mapping[str, Any], keep_volume_kinds: bool) -> dict[str, Any]:
    # What the pod template gave (every field holding an object or a list) is shared with equal pods;
    # nodeName and the other scalars are the pod's own.
    out: dict[str, Any] = {}
    intern = sys.intern
    for k, given in spec.items():
        if k in _SPEC_DROP:
            continue
        v = _containers(given) if k in _CONTAINER_LISTS else given
        t = type(v)
        if t is str:
            v = intern(v) if len(v) <= INTERN_MAX else v
        elif (t is dict or t is list) and v:
            v = share(v)
        elif t not in _SCALARS:
            v = compact(v)
        out[intern(k)] = v
    volumes = spec.get("volumes")
    if keep_volume_kinds and isinstance(volumes, list):
        out["volumes"] = _shared_or_compact([_volume_kind(v) for v in volumes if isinstance(v, Mapping)])
    return out


def _pod_status(status: Mapping[str, Any]) -> dict[str, Any]:
    return {sys.intern(k): compact(status[k]) for k in _POD_STATUS_KEEP if k in status}


def _node_status(status: Mapping[str, Any]) -> dict[str, Any]:
    return {
        sys.intern(k): _shared_or_compact(v) if k in _SHARED_NODE_STATUS else compact(v)
        for k, v in status.items()
        if k != "images"
    }


Section = Callable[[Mapping[str, Any]], dict[str, Any]]


def _rebuilt(obj: Obj, meta_shared: frozenset[str], sections: Mapping[str, Section]) -> dict[str, Any]:
    """``obj`` with its metadata and ``sections`` built by their functions, the rest compacted (a
    missing metadata comes out empty)."""
    out: dict[str, Any] = {}
    intern = sys.intern
    for k, v in obj.items():
        if k == "metadata":
            out["metadata"] = _meta(v, meta_shared)
        elif k in sections and isinstance(v, Mapping):
            out[intern(k)] = sections[k](v)
        elif type(v) is str:  # kind, apiVersion
            out[intern(k)] = intern(v) if len(v) <= INTERN_MAX else v
        else:
            out[intern(k)] = compact(v)
    out.setdefault("metadata", {})
    return out


_POD_SECTIONS: dict[bool, dict[str, Section]] = {
    keep: {"spec": partial(_pod_spec, keep_volume_kinds=keep), "status": _pod_status}
    for keep in (False, True)
}


def slim_pod(obj: Obj, *, keep_volume_kinds: bool = False) -> Obj:
    """A pod as the cluster processes cache it (see the module docstring for what is kept), built field
    by field: a generic walk over the whole object cost more than the list's decoding."""
    return _rebuilt(obj, _POD_META_SHARED, _POD_SECTIONS[keep_volume_kinds])


_SHARED_NODE_STATUS = frozenset(("allocatable", "capacity", "nodeInfo", "daemonEndpoints"))
_NO_SHARED: frozenset[str] = frozenset()
_NODE_SECTIONS = {"status": _node_status}


def slim_node(obj: Obj) -> Obj:
    """A node without managedFields and images; what the nodes of a pool have alike in their status
    (capacity, allocatable, the node software) is shared among them."""
    return _rebuilt(obj, _NO_SHARED, _NODE_SECTIONS)
