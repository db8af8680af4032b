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

import json
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping
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
    key = json.dumps(value, separators=(",", ":"))
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


def _meta(obj: Obj) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return meta


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


def slim_pod(obj: Obj, *, keep_volume_kinds: bool = False) -> Obj:
    """A pod as the cluster processes cache it (see the module docstring for what is kept)."""
    out: dict[str, Any] = dict(obj)
    out["metadata"] = _meta(obj)
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        volumes = spec.get("volumes")
        spec = {k: v for k, v in spec.items() if k != "volumes"}
        if keep_volume_kinds and isinstance(volumes, list):
            spec["volumes"] = [_volume_kind(v) for v in volumes if isinstance(v, Mapping)]
        for key in ("containers", "initContainers"):
            if key in spec:
                spec[key] = _containers(spec[key])
        spec.pop("ephemeralContainers", None)
        out["spec"] = spec
    status = obj.get("status")
    if isinstance(status, Mapping):
        out["status"] = {k: status[k] for k in _POD_STATUS_KEEP if k in status}
    # What the pod template gave (every spec field holding an object or a list, and these metadata
    # fields) is shared with equal pods, before the rest is compacted; nodeName and the status are the
    # pod's own.
    _share_fields(out["metadata"], _SHARED_META)
    spec = out.get("spec")
    _share_fields(spec, list(spec) if isinstance(spec, dict) else ())
    pod: dict[str, Any] = compact(out)
    return pod


def _share_fields(section: Any, keys: Iterable[str]) -> None:
    """Replace ``section[key]`` by its shared equal (``section`` is a dict this module just built)."""
    if isinstance(section, dict):
        for key in keys:
            if key in section:
                section[key] = share(section[key])


_SHARED_NODE_STATUS = ("allocatable", "capacity", "nodeInfo", "daemonEndpoints")


def slim_node(obj: Obj) -> Obj:
    """A node without managedFields and images; what the nodes of a pool have alike in their status
    (capacity, allocatable, the node software) is shared among them."""
    out: dict[str, Any] = dict(obj)
    out["metadata"] = _meta(obj)
    status = obj.get("status")
    if isinstance(status, Mapping) and "images" in status:
        out["status"] = {k: v for k, v in status.items() if k != "images"}
    if isinstance(out.get("status"), Mapping):
        out["status"] = dict(out["status"])
        _share_fields(out["status"], _SHARED_NODE_STATUS)
    node: dict[str, Any] = compact(out)
    return node
