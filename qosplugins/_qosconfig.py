"""Which ``resourceQOSStrategy`` class a pod or a kube QoS tier follows, for the node QoS plugins.

Sees only :mod:`koordlet.api`, like the plugins. The agent has validated, merged and typed the NodeSLO
(``api.NodeSLO.resource_qos``) before plugins see it, so nothing here parses JSON.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordlet import api

LSR_CLASS, LS_CLASS, BE_CLASS, SYSTEM_CLASS, CGROUP_ROOT = (
    "lsrClass",
    "lsClass",
    "beClass",
    "systemClass",
    "cgroupRoot",
)

_BY_QOS: Mapping[api.QOSClass, str] = {
    api.QOSClass.LSE: LSR_CLASS,  # LSE pods follow the LSR class, as in Koordinator
    api.QOSClass.LSR: LSR_CLASS,
    api.QOSClass.LS: LS_CLASS,
    api.QOSClass.BE: BE_CLASS,
    api.QOSClass.SYSTEM: SYSTEM_CLASS,
}
_BY_KUBE_QOS: Mapping[api.KubeQOSClass, str] = {
    # Koordinator's GetKubeQoSResourceQoSByQoSClass: the tier's static settings follow this class
    api.KubeQOSClass.GUARANTEED: LSR_CLASS,
    api.KubeQOSClass.BURSTABLE: LS_CLASS,
    api.KubeQOSClass.BESTEFFORT: BE_CLASS,
}


def class_key(qos: api.QOSClass) -> str | None:
    """The ``resourceQOSStrategy`` key of a pod's class (``None`` for a pod without a class)."""
    return _BY_QOS.get(qos)


def tier_class_key(kube_qos: api.KubeQOSClass) -> str:
    return _BY_KUBE_QOS[kube_qos]


def class_qos(slo: api.NodeSLO, key: str) -> api.ResourceQOS:
    """``resourceQOSStrategy.<key>`` (e.g. ``beClass``), typed."""
    return slo.resource_qos.of(key)
