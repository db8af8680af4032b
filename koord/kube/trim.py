"""Trimming of cached objects for the cluster processes' informers (client-go's ``SetTransform``).

kube-scheduler and the descheduler keep full objects; our processes keep what their plugins read, so that
100 000 pods fit in a few hundred MiB. :func:`slim_pod` drops ``metadata.managedFields``, the
``last-applied-configuration`` annotation, container fields other than name, image, resources, ports,
restartPolicy and resizePolicy, ``spec.volumes`` (unless asked to keep their kinds and claim names),
ephemeral containers, and status fields other than phase, conditions, qosClass, nominatedNodeName and
startTime.
:func:`slim_node` drops ``managedFields`` and ``status.images``. Every result has its keys and short
strings interned (:func:`compact`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_CONTAINER_KEEP = ("name", "image", "resources", "ports", "restartPolicy", "resizePolicy")
_POD_STATUS_KEEP = ("phase", "conditions", "qosClass", "nominatedNodeName", "startTime")


INTERN_MAX = 32
"""Strings up to this length are interned: keys always repeat, and so do short values (phases, QoS
classes, namespaces, label values, resource names), while UIDs and long names rarely do."""


def compact(obj: Any) -> Any:
    """``obj`` rebuilt with interned keys and short values. Every watch event is decoded on its own, so
    without this each of 100 000 cached pods carries its own copy of every key: half the memory."""
    if isinstance(obj, dict):
        return {sys.intern(k) if isinstance(k, str) else k: compact(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [compact(v) for v in obj]
    if isinstance(obj, str) and len(obj) <= INTERN_MAX:
        return sys.intern(obj)
    return obj


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
    return compact(out)  # type: ignore[no-any-return]


def slim_node(obj: Obj) -> Obj:
    out: dict[str, Any] = dict(obj)
    out["metadata"] = _meta(obj)
    status = obj.get("status")
    if isinstance(status, Mapping) and "images" in status:
        out["status"] = {k: v for k, v in status.items() if k != "images"}
    return compact(out)  # type: ignore[no-any-return]
