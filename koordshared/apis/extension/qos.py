"""Koordinator's pod classification (its ``apis/extension``): QoS classes, priority classes and bands, and
the batch and mid resources. Pure: stdlib only; ``koordlet.api`` re-exports these names.

Two readings, as Koordinator has them: raw (``GetPodQoSClassRaw``, ``GetPodPriorityClassRaw``), the
labels alone (an empty or unknown label value is "none", never a fall-through), else the band of
``spec.priority``; Koordinator's QoS plugins decide on these (only a pod *labelled* BE is an eviction
candidate). With default (``GetPodQoSClassWithDefault``, ``GetPodPriorityClassWithDefault``): the raw
class, else from the Kubernetes QoS class; the NodeMetric report, the manager, the extender and the
descheduler classify pods this way. The agent builds its ``PodInfo`` with both.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from koordshared.apis.core.pod import KubeQOSClass


class QOSClass(enum.StrEnum):
    """Koordinator QoS (label ``koordinator.sh/qosClass``; defaulted from the Kubernetes QoS class)."""

    SYSTEM = "SYSTEM"
    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    NONE = ""


class PriorityClass(enum.StrEnum):
    """Koordinator priority bands (label ``koordinator.sh/priority-class`` or from ``spec.priority``)."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


LABEL_QOS = "koordinator.sh/qosClass"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"

# koordinator's priority bands: [low, high] of spec.priority per class.
PRIORITY_BANDS: tuple[tuple[PriorityClass, int, int], ...] = (
    (PriorityClass.PROD, 9000, 9999),
    (PriorityClass.MID, 7000, 7999),
    (PriorityClass.BATCH, 5000, 5999),
    (PriorityClass.FREE, 3000, 3999),
)
_KUBE_TO_KOORD = {
    KubeQOSClass.GUARANTEED: QOSClass.LSR,
    KubeQOSClass.BURSTABLE: QOSClass.LS,
    KubeQOSClass.BESTEFFORT: QOSClass.BE,
}


def qos_raw(labels: Mapping[str, str]) -> QOSClass:
    """Koordinator's ``GetPodQoSClassRaw``: the class the label names; none without a known label."""
    try:
        return QOSClass(labels.get(LABEL_QOS, ""))
    except ValueError:
        return QOSClass.NONE


def qos_of(labels: Mapping[str, str], kube_qos: KubeQOSClass) -> QOSClass:
    """Koordinator's ``GetPodQoSClassWithDefault``: a known label wins; otherwise from the kube QoS."""
    raw = qos_raw(labels)
    return raw if raw is not QOSClass.NONE else _KUBE_TO_KOORD[kube_qos]


def priority_class_raw(labels: Mapping[str, str], priority: int | None) -> PriorityClass:
    """Koordinator's ``GetPodPriorityClassRaw``: a present label decides (an empty or unknown value is
    none, without looking at ``spec.priority``); otherwise the band ``spec.priority`` falls in."""
    if LABEL_PRIORITY_CLASS in labels:
        try:
            return PriorityClass(labels[LABEL_PRIORITY_CLASS])
        except ValueError:
            return PriorityClass.NONE
    if priority is not None:
        for cls, low, high in PRIORITY_BANDS:
            if low <= priority <= high:
                return cls
    return PriorityClass.NONE


def priority_class_of(labels: Mapping[str, str], priority: int | None, qos: QOSClass) -> PriorityClass:
    """``GetPodPriorityClassWithDefault``: the raw class, else from the QoS with default ``qos`` (BE ->
    batch, every other class -> prod)."""
    raw = priority_class_raw(labels, priority)
    if raw is not PriorityClass.NONE:
        return raw
    if qos is QOSClass.BE:
        return PriorityClass.BATCH
    if qos is QOSClass.NONE:
        return PriorityClass.NONE
    return PriorityClass.PROD
