"""The pod validation users hit (Koordinator's ``webhook/pod/validating/cluster_colocation_profile.go``),
with Koordinator's field paths and messages: a pod asking for batch resources must be labelled BE; BE with
no priority class or prod, and LSR with none, mid, batch or free, are refused; an LSR or LSE pod requests
whole CPUs; on update the QoS class, the priority class and ``koordinator.sh/priority`` cannot change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordshared.apis.core import pod as podschema
from koordshared.apis.core.resources import pod_requests
from koordshared.apis.extension import qos as extension

Obj = Mapping[str, Any]
P = extension.PriorityClass
FORBIDDEN = (
    (extension.QOSClass.BE, (P.NONE, P.PROD)),
    (extension.QOSClass.LSR, (P.NONE, P.MID, P.BATCH, P.FREE)),
)
"""The QoS class and priority class combinations Koordinator refuses."""


def _labels(pod: Obj) -> Mapping[str, str]:
    return podschema.str_map(podschema.as_map(podschema.as_map(pod, "metadata"), "labels"))


def _priority_class(pod: Obj) -> P:
    raw = podschema.as_map(pod, "spec").get("priority")
    return extension.priority_class_raw(
        _labels(pod), raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    )


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _immutable(path: str, new: str, old: str) -> list[str]:
    return [] if new == old else [f"{path}: Invalid value: {_quote(new)}: field is immutable"]


def _cpu_text(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def errors(pod: Obj, old: Obj | None = None) -> list[str]:
    """Koordinator's field errors for ``pod`` (``old``: the pod before an update)."""
    out: list[str] = []
    qos = extension.qos_raw(_labels(pod))
    if old is not None:
        out += _immutable(f"labels.{extension.LABEL_QOS}", qos.value, extension.qos_raw(_labels(old)).value)
        out += _immutable("spec.priority", _priority_class(pod).value, _priority_class(old).value)
        key = extension.LABEL_POD_SUB_PRIORITY
        out += _immutable(f"labels.{key}", _labels(pod).get(key, ""), _labels(old).get(key, ""))
    requests = pod_requests(pod)
    if (
        requests.get(extension.BATCH_CPU) or requests.get(extension.BATCH_MEMORY)
    ) and qos is not extension.QOSClass.BE:
        out.append(
            f"labels.{extension.LABEL_QOS}: Required value: must specify koordinator QoS BE with koordinator "
            "colocation resources"
        )
    priority = _priority_class(pod)
    for forbidden_qos, classes in FORBIDDEN:
        if qos is forbidden_qos and priority in classes:
            out.append(
                f"Pod: Forbidden: {extension.LABEL_QOS}={qos.value} and priorityClass={priority.value} "
                "cannot be used in combination"
            )
    if qos in (extension.QOSClass.LSR, extension.QOSClass.LSE):
        cpu = requests.get("cpu", 0)
        where = "pod.spec.containers[*].resources.requests"
        if cpu == 0:
            out.append(f"{where}: Required value: LSR Pod must declare the requested CPUs")
        elif cpu % 1000:
            why = "the requested CPUs of LSR Pod must be integer"
            out.append(f"{where}: Invalid value: {_quote(_cpu_text(cpu))}: {why}")
    return out


def message(errs: list[str]) -> str:
    """``ErrorList.ToAggregate().Error()``: one error as is, several in brackets."""
    return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
