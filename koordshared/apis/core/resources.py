"""Resource lists of any resource name: a pod's effective requests and limits, a node's allocatable.

Kubernetes' pod-requests rule (component-helpers' ``PodRequests``/``PodLimits``: app containers plus
sidecars, at least the largest init step, plus the overhead) is written once, in :func:`_pod_total`, and
every process counts a pod's requests with it. Values are exact (``Fraction``) until :func:`value_of`
reduces them the way Koordinator's vectorizer does: ``MilliValue()`` for ``cpu``, ``Value()`` for
everything else (``batch-cpu`` is already in millicores); :func:`pod_requests` answers in those units.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any, TypeVar

from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.meta.quantity import parse_quantity
from koordshared.runtime.errors import InvalidValue

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"

ResourceList = dict[str, Fraction]
N = TypeVar("N", int, Fraction)


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


def _add(into: dict[str, N], items: Mapping[str, N]) -> None:
    for name, q in items.items():
        into[name] = into.get(name, 0) + q


def _max(into: dict[str, N], items: Mapping[str, N]) -> None:
    for name, q in items.items():
        if name not in into or q > into[name]:
            into[name] = q


def _pod_total(
    pod: Any, field: str, read: Callable[[Any], dict[str, N] | None], *, overhead: bool
) -> dict[str, N] | None:
    """component-helpers' algorithm over the containers' ``resources.<field>``, each read by ``read``:
    app containers plus sidecars (restartable init containers), at least the largest init step (an init
    container plus the sidecars started before it), plus ``spec.overhead`` when asked. ``None`` when
    ``read`` gives up on a list."""
    spec = as_map(pod, "spec")
    total: dict[str, N] = {}
    for c in as_list(spec, "containers"):
        own = read(as_map(as_map(c, "resources"), field))
        if own is None:
            return None
        if total:
            _add(total, own)
        else:
            total = own  # a fresh dict of read's
    init = as_list(spec, "initContainers")
    if init:
        sidecars: dict[str, N] = {}
        init_peak: dict[str, N] = {}
        for c in init:
            own = read(as_map(as_map(c, "resources"), field))
            if own is None:
                return None
            if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
                _add(total, own)
                _add(sidecars, own)
                step = dict(sidecars)
            else:
                step = dict(own)
                _add(step, sidecars)
            _max(init_peak, step)
        _max(total, init_peak)
    if overhead and "overhead" in spec:
        extra = read(as_map(spec, "overhead"))
        if extra is None:
            return None
        _add(total, extra)
    return total


def pod_requests_list(pod: Any) -> ResourceList:
    """``PodRequests`` exactly (:func:`_pod_total`), plus ``spec.overhead`` for every resource it names."""
    return _pod_total(pod, "requests", parse_resource_list, overhead=True) or {}


def pod_limits_list(pod: Any) -> ResourceList:
    """``PodLimits`` exactly; the overhead is added only to resources that have a limit (an unlimited
    resource stays unlimited)."""
    total = _pod_total(pod, "limits", parse_resource_list, overhead=False) or {}
    for name, q in parse_resource_list(as_map(as_map(pod, "spec"), "overhead")).items():
        if name in total:
            total[name] += q
    return total


def pod_requests(pod: Any) -> dict[str, int]:
    """``PodRequests`` in Koordinator's units (:func:`value_of` of the exact sum). Sums of exact integers
    when every quantity is one in its unit, which is what rounding the exact sum gives; otherwise the
    exact path. This is the hot path of the scheduler's ``PodInfo``."""
    total = _pod_total(pod, "requests", unit_values, overhead=True)
    if total is not None:
        return total
    return {n: value_of(n, q) for n, q in pod_requests_list(pod).items()}


def unit_values(raw: Any) -> dict[str, int] | None:
    """A ResourceList in Koordinator's units when every entry is an exact integer of its unit, else
    ``None`` (an entry below the unit, or not a quantity: the caller takes the exact path)."""
    out: dict[str, int] = {}
    if not isinstance(raw, Mapping):
        return out
    for name, text in raw.items():
        value = unit_value(str(name), text) if isinstance(text, str | int) else None
        if value is None:
            return None
        out[str(name)] = value
    return out


@lru_cache(maxsize=4096)
def unit_value(name: str, text: str | int) -> int | None:
    """``value_of(name, text)`` when the quantity is an exact integer in the unit of ``name``
    (millicores for cpu), else ``None``. Quantities repeat across pods ("100m", "1Gi"), so the exact
    parse runs once per spelling."""
    try:
        q = parse_quantity(text)
    except InvalidValue:
        return None
    scaled = q * 1000 if name == "cpu" else q
    return int(scaled) if scaled.denominator == 1 else None


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
