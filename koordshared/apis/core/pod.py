"""The pod as Kubernetes' core/v1 defines it, on the pod's JSON: its Kubernetes QoS class (``GetPodQOS``),
requests, and the identity, owner and lifecycle facts evictors and plugins decide on. Koordinator's own
classification (QoS and priority classes) is :mod:`koordshared.apis.extension.qos`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from koordshared.apis.meta.quantity import parse_time, to_milli
from koordshared.runtime.errors import InvalidValue

_COMPUTE = ("cpu", "memory")

Obj = Mapping[str, Any]


class KubeQOSClass(enum.StrEnum):
    """Kubernetes QoS class; it picks the kubepods tier (cgroup parent) of the pod."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


def as_map(obj: Any, key: str) -> Mapping[str, Any]:
    """``obj[key]`` when both are mappings, else ``{}`` (API objects are not trusted in shape)."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def as_list(obj: Any, key: str) -> list[Any]:
    """``obj[key]`` when it is a list, else ``[]``."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def str_map(value: Mapping[str, Any]) -> dict[str, str]:
    """Labels or annotations as ``str -> str``."""
    return {str(k): str(v) for k, v in value.items()}


def kube_qos_of(pod: Obj) -> KubeQOSClass:
    """``status.qosClass`` if valid, else Kubernetes' ``GetPodQOS`` over init and app containers."""
    raw = as_map(pod, "status").get("qosClass")
    if isinstance(raw, str):
        try:
            return KubeQOSClass(raw)
        except ValueError:
            pass
    spec = as_map(pod, "spec")
    containers = as_list(spec, "containers") + as_list(spec, "initContainers")
    any_set = False
    guaranteed = True
    for c in containers:
        res = as_map(c, "resources")
        requests, limits = as_map(res, "requests"), as_map(res, "limits")
        for name in _COMPUTE:
            req, lim = requests.get(name), limits.get(name)
            if req is not None or lim is not None:
                any_set = True
            if lim is None or (req is not None and _safe_quantity(req) != _safe_quantity(lim)):
                guaranteed = False
    if not any_set:
        return KubeQOSClass.BESTEFFORT
    if guaranteed and containers:
        return KubeQOSClass.GUARANTEED
    return KubeQOSClass.BURSTABLE


def _safe_quantity(value: Any) -> int | None:
    try:
        return to_milli(value)
    except (InvalidValue, TypeError):
        return None


# ---- identity, owners, lifecycle: the facts evictors and plugins decide on (Koordinator's
# ``pkg/descheduler/utils``, kube's ``pod`` helpers) -------------------------------------------------

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""``scheduling.SystemCriticalPriority``: system-node-critical and system-cluster-critical and above."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
EVICTION_COST_ANNOTATION = "scheduling.koordinator.sh/eviction-cost"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
"""A pod carrying it passes the evictor's filters whatever they say (Koordinator and descheduler)."""


def meta(pod: Obj) -> Mapping[str, Any]:
    # Called for every pod of every node each round: API objects always carry metadata as an object,
    # so no shape check here (as_map's isinstance against the Mapping ABC would dominate the round).
    m = pod.get("metadata")
    return m if m is not None else {}


def pod_key(pod: Obj) -> str:
    """``namespace/name``, how the caches and the NodeMetric name a pod (unlike kube's
    ``MetaNamespaceKeyFunc``, :func:`koordshared.kube.informer.object_key`, a pod always has a namespace)."""
    m = pod.get("metadata") or {}
    return f"{m.get('namespace') or ''}/{m.get('name') or ''}"


def pod_uid(pod: Obj) -> str:
    """``metadata.uid``, else :func:`pod_key` (a pod not yet created has no uid): how the scheduler's
    cache, queue and plugins tell one pod attempt from another."""
    m = pod.get("metadata") or {}
    return str(m.get("uid") or pod_key(pod))


def binding(namespace: str, name: str, uid: str, node: str) -> tuple[str, dict[str, Any]]:
    """The ``POST`` path and the ``v1 Binding`` body that bind a pod to ``node``, with its uid (when
    known) as a precondition: the API server refuses the binding of a re-created pod of that name."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body


def annotations_of(pod: Obj) -> Mapping[str, Any]:
    return as_map(meta(pod), "annotations")


def owner_refs(pod: Obj) -> list[Mapping[str, Any]]:
    return [o for o in as_list(meta(pod), "ownerReferences") if isinstance(o, Mapping)]


def controller_ref(pod: Obj) -> Mapping[str, Any] | None:
    """The owner with ``controller: true`` (else the first owner): the pod's workload."""
    owners = owner_refs(pod)
    for o in owners:
        if o.get("controller"):
            return o
    return owners[0] if owners else None


def index_by_owner(pod: Obj) -> list[str]:
    """Informer index: the UID of the pod's workload (none for a bare pod)."""
    ref = controller_ref(pod)
    uid = ref.get("uid") if ref else None
    return [str(uid)] if uid else []


def is_daemonset_pod(pod: Obj) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in owner_refs(pod))


def is_mirror_pod(pod: Obj) -> bool:
    return MIRROR_ANNOTATION in annotations_of(pod)


def is_static_pod(pod: Obj) -> bool:
    source = annotations_of(pod).get(SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_terminating(pod: Obj) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def priority(pod: Obj) -> int:
    """``spec.priority`` (0 when unset, as ``PodPriority``)."""
    value = as_map(pod, "spec").get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def has_priority(pod: Obj) -> bool:
    value = as_map(pod, "spec").get("priority")
    return isinstance(value, int) and not isinstance(value, bool)


def is_critical(pod: Obj) -> bool:
    return has_priority(pod) and priority(pod) >= SYSTEM_CRITICAL_PRIORITY


def _volumes(pod: Obj) -> list[Mapping[str, Any]]:
    return [v for v in as_list(as_map(pod, "spec"), "volumes") if isinstance(v, Mapping)]


def has_local_storage(pod: Obj) -> bool:
    return any("hostPath" in v or "emptyDir" in v for v in _volumes(pod))


def has_pvc(pod: Obj) -> bool:
    return any("persistentVolumeClaim" in v for v in _volumes(pod))


def _int32_annotation(pod: Obj, key: str) -> int:
    """An int32 annotation as Kubernetes parses it (no sign prefix ``+``, no leading zeros); 0 when
    absent or invalid."""
    raw = annotations_of(pod).get(key)
    if not isinstance(raw, str) or not raw:
        return 0
    digits = raw[1:] if raw.startswith("-") else raw
    if not digits.isdecimal() or (digits.startswith("0") and digits != "0") or raw == "-0":
        return 0
    value = int(raw)
    return value if -(2**31) <= value < 2**31 else 0


def deletion_cost(pod: Obj) -> int:
    return _int32_annotation(pod, DELETION_COST_ANNOTATION)


def eviction_cost(pod: Obj) -> int:
    return _int32_annotation(pod, EVICTION_COST_ANNOTATION)


def creation_time(pod: Obj) -> float:
    """``metadata.creationTimestamp`` in epoch seconds (0 when absent)."""
    return parse_time(meta(pod).get("creationTimestamp")) or 0.0


def condition(obj: Obj, kind: str) -> Mapping[str, Any] | None:
    """The status condition of type ``kind`` (None: there is none) of a pod, or of any object whose
    ``status.conditions`` have the same shape (a Reservation, a PodMigrationJob)."""
    for cond in as_list(as_map(obj, "status"), "conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def with_condition(conditions: Iterable[Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``conditions`` with ``new`` in place of the one of its type (appended when there is none), as
    ``podutil.UpdatePodCondition`` sets it: replaced whole, its ``lastTransitionTime`` kept from the old
    one while the status stays the same."""
    out = [dict(c) for c in conditions if isinstance(c, Mapping)]
    put = dict(new)
    for i, old in enumerate(out):
        if old.get("type") == put.get("type"):
            if old.get("status") == put.get("status") and old.get("lastTransitionTime"):
                put["lastTransitionTime"] = old["lastTransitionTime"]
            out[i] = put
            return out
    out.append(put)
    return out


def condition_true(obj: Obj, kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def is_ready(pod: Obj) -> bool:
    return condition_true(pod, "Ready")


def is_bound(pod: Obj) -> bool:
    """Bound through the API server: its binding sets ``PodScheduled`` True (a pod only a scheduler's cache
    assumed on a node has its node name, not this)."""
    return condition_true(pod, "PodScheduled")
