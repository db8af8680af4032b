"""Resource lists of any resource name: a pod's effective requests and limits, a node's allocatable (schema).

:func:`pod_requests` in :mod:`koordshared.apis.core.pod` answers cpu and memory only; the scheduler side also
needs Koordinator's extended names (``kubernetes.io/batch-cpu``, ``kubernetes.io/mid-memory``...) and
limits, so this module computes component-helpers' ``PodRequests``/``PodLimits`` over every name.
Values are exact (``Fraction``) until :func:`value_of` reduces them the way Koordinator's vectorizer does:
``MilliValue()`` for ``cpu``, ``Value()`` for everything else (``batch-cpu`` is already in millicores).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.meta.quantity import parse_quantity
from koordshared.runtime.errors import InvalidValue

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"

ResourceList = dict[str, Fraction]


def parse_resource_list(raw: Any) -> ResourceList:
    """A ``ResourceList`` object as exact values; entries that are not quantities are left out."""
    out: ResourceList = {}
    if not isinstance(raw, Mapping):
        return out
    for name, value in raw.items():
        if not isinstance(value, str | int | float):
            continue
        try:
            out[str(name)] = parse_quantity(value)
        except InvalidValue:
            continue
    return out


def value_of(name: str, quantity: Fraction) -> int:
    """Koordinator's ``getResourceValue``: millicores for ``cpu``, the rounded-up value for the rest."""
    return math.ceil(quantity * 1000) if name == "cpu" else math.ceil(quantity)


def _add(into: ResourceList, items: Mapping[str, Fraction]) -> None:
    for name, q in items.items():
        into[name] = into.get(name, Fraction(0)) + q


def _max(into: ResourceList, items: Mapping[str, Fraction]) -> None:
    for name, q in items.items():
        if name not in into or q > into[name]:
            into[name] = q


def _pod_list(pod: Any, field: str) -> ResourceList:
    """component-helpers' algorithm: app containers plus sidecars (restartable init containers), at
    least the largest init step (an init container plus the sidecars started before it)."""
    spec = as_map(pod, "spec")
    total: ResourceList = {}
    for c in as_list(spec, "containers"):
        _add(total, parse_resource_list(as_map(as_map(c, "resources"), field)))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in as_list(spec, "initContainers"):
        own = parse_resource_list(as_map(as_map(c, "resources"), field))
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(total, init_peak)
    return total


def pod_requests_list(pod: Any) -> ResourceList:
    """``PodRequests``: see :func:`_pod_list`, plus ``spec.overhead`` for every resource it names."""
    total = _pod_list(pod, "requests")
    _add(total, parse_resource_list(as_map(as_map(pod, "spec"), "overhead")))
    return total


def pod_limits_list(pod: Any) -> ResourceList:
    """``PodLimits``: see :func:`_pod_list`; the overhead is added only to resources that have a limit
    (an unlimited resource stays unlimited)."""
    total = _pod_list(pod, "limits")
    for name, q in parse_resource_list(as_map(as_map(pod, "spec"), "overhead")).items():
        if name in total:
            total[name] += q
    return total


def node_allocatable(node: Any) -> ResourceList:
    """Koordinator's ``EstimateNode``: ``status.allocatable``, with the entries of the
    ``node.koordinator.sh/raw-allocatable`` annotation (a JSON ResourceList) laid over it when the
    annotation parses, is non-empty and differs; this undoes the manager's allocatable amplification."""
    allocatable = parse_resource_list(as_map(as_map(node, "status"), "allocatable"))
    text = as_map(as_map(node, "metadata"), "annotations").get(ANNOTATION_RAW_ALLOCATABLE)
    if not isinstance(text, str) or not text:
        return allocatable
    try:
        doc = json.loads(text)
    except ValueError:
        return allocatable
    raw = parse_resource_list(doc)
    if not isinstance(doc, Mapping) or not raw or len(raw) != len(doc) or raw == allocatable:
        return allocatable  # unparsable entries make Go's unmarshal fail as a whole
    return {**allocatable, **raw}


def is_extended_resource(name: str) -> bool:
    """kube's ``IsExtendedResourceName``: a prefixed name outside ``kubernetes.io/`` and not ``requests.``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """kube-scheduler's ``IsScalarResourceName``: the names a NodeInfo keeps as scalar resources
    (extended, ``hugepages-*``, ``kubernetes.io/``-prefixed and ``attachable-volumes-*``); not ``cpu``,
    ``memory``, ``ephemeral-storage`` or ``pods``."""
    return (
        is_extended_resource(name)
        or name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
    )
