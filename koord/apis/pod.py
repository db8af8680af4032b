"""Koordinator's pod classification and requests, on the pod's JSON (schema layer: agent and cluster side).

Two readings, as Koordinator has them (``apis/extension``):

- raw (``GetPodQoSClassRaw``, ``GetPodPriorityClassRaw``): the ``koordinator.sh/qosClass`` label alone;
  the ``koordinator.sh/priority-class`` label when the pod has it (a present but empty or unknown value is
  "none", never a fall-through), else the band of ``spec.priority``. Koordinator's QoS plugins decide on
  these: only a pod *labelled* BE is an eviction candidate, burstability is decided from the label.
- with default (``GetPodQoSClassWithDefault``, ``GetPodPriorityClassWithDefault``): the raw class, else
  from the Kubernetes QoS class (computed from requests and limits when ``status.qosClass`` is absent) or,
  for the priority, from that QoS class. The NodeMetric report, the manager's batch-resource calculation,
  the extender and the descheduler classify pods this way.

The agent builds its ``PodInfo`` with both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord.apis import extension
from koord.apis.quantity import to_int, to_milli
from koord.runtime.errors import InvalidValue

LABEL_QOS = "koordinator.sh/qosClass"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"

# koordinator's priority bands: [low, high] of spec.priority per class.
PRIORITY_BANDS: tuple[tuple[extension.PriorityClass, int, int], ...] = (
    (extension.PriorityClass.PROD, 9000, 9999),
    (extension.PriorityClass.MID, 7000, 7999),
    (extension.PriorityClass.BATCH, 5000, 5999),
    (extension.PriorityClass.FREE, 3000, 3999),
)
_KUBE_TO_KOORD = {
    extension.KubeQOSClass.GUARANTEED: extension.QOSClass.LSR,
    extension.KubeQOSClass.BURSTABLE: extension.QOSClass.LS,
    extension.KubeQOSClass.BESTEFFORT: extension.QOSClass.BE,
}
_COMPUTE = ("cpu", "memory")

Obj = Mapping[str, Any]


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


def kube_qos_of(pod: Obj) -> extension.KubeQOSClass:
    """``status.qosClass`` if valid, else Kubernetes' ``GetPodQOS`` over init and app containers."""
    raw = as_map(pod, "status").get("qosClass")
    if isinstance(raw, str):
        try:
            return extension.KubeQOSClass(raw)
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
        return extension.KubeQOSClass.BESTEFFORT
    if guaranteed and containers:
        return extension.KubeQOSClass.GUARANTEED
    return extension.KubeQOSClass.BURSTABLE


def _safe_quantity(value: Any) -> int | None:
    try:
        return to_milli(value)
    except (InvalidValue, TypeError):
        return None


def qos_raw(labels: Mapping[str, str]) -> extension.QOSClass:
    """Koordinator's ``GetPodQoSClassRaw``: the class the label names; none without a known label."""
    try:
        return extension.QOSClass(labels.get(LABEL_QOS, ""))
    except ValueError:
        return extension.QOSClass.NONE


def qos_of(labels: Mapping[str, str], kube_qos: extension.KubeQOSClass) -> extension.QOSClass:
    """Koordinator's ``GetPodQoSClassWithDefault``: a known label wins; otherwise from the kube QoS."""
    raw = qos_raw(labels)
    return raw if raw is not extension.QOSClass.NONE else _KUBE_TO_KOORD[kube_qos]


def priority_class_raw(labels: Mapping[str, str], priority: int | None) -> extension.PriorityClass:
    """Koordinator's ``GetPodPriorityClassRaw``: a present label decides (an empty or unknown value is
    none, without looking at ``spec.priority``); otherwise the band ``spec.priority`` falls in."""
    if LABEL_PRIORITY_CLASS in labels:
        try:
            return extension.PriorityClass(labels[LABEL_PRIORITY_CLASS])
        except ValueError:
            return extension.PriorityClass.NONE
    if priority is not None:
        for cls, low, high in PRIORITY_BANDS:
            if low <= priority <= high:
                return cls
    return extension.PriorityClass.NONE


def priority_class_of(
    labels: Mapping[str, str], priority: int | None, qos: extension.QOSClass
) -> extension.PriorityClass:
    """``GetPodPriorityClassWithDefault``: the raw class, else from the QoS with default ``qos`` (BE ->
    batch, every other class -> prod)."""
    raw = priority_class_raw(labels, priority)
    if raw is not extension.PriorityClass.NONE:
        return raw
    if qos is extension.QOSClass.BE:
        return extension.PriorityClass.BATCH
    if qos is extension.QOSClass.NONE:
        return extension.PriorityClass.NONE
    return extension.PriorityClass.PROD


def _add_requests(total: list[int], requests: Mapping[str, Any]) -> None:
    for i, (name, milli) in enumerate((("cpu", True), ("memory", False))):
        raw = requests.get(name)
        if raw is None:
            continue
        try:
            total[i] += to_milli(raw) if milli else to_int(raw)
        except (InvalidValue, TypeError):
            continue  # an unparsable request counts as none, as the agent does


def pod_requests(pod: Obj) -> tuple[int, int]:
    """``(cpu millicores, memory bytes)`` the pod requests, as Kubernetes' ``resourcehelper.PodRequests``:
    the app containers plus the sidecars (restartable init containers), at least the largest init step
    (an init container plus the sidecars started before it), plus ``spec.overhead``."""
    spec = as_map(pod, "spec")
    total = [0, 0]
    for c in as_list(spec, "containers"):
        _add_requests(total, as_map(as_map(c, "resources"), "requests"))
    sidecars = [0, 0]
    init_peak = [0, 0]
    for c in as_list(spec, "initContainers"):
        requests = as_map(as_map(c, "resources"), "requests")
        step = [0, 0]
        _add_requests(step, requests)
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            total = [t + s for t, s in zip(total, step, strict=True)]
            sidecars = [t + s for t, s in zip(sidecars, step, strict=True)]
            step = list(sidecars)
        else:
            step = [t + s for t, s in zip(step, sidecars, strict=True)]
        init_peak = [max(a, b) for a, b in zip(init_peak, step, strict=True)]
    total = [max(a, b) for a, b in zip(total, init_peak, strict=True)]
    _add_requests(total, as_map(spec, "overhead"))
    return total[0], total[1]
