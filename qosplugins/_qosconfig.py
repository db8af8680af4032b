"""Reading ``resourceQOSStrategy`` for the node QoS plugins: which class config a pod or tier follows, and
typed fields out of the NodeSLO's JSON.

Sees only :mod:`koordlet.api`, like the plugins. The agent has validated and merged the NodeSLO over
Koordinator's defaults before plugins see it, so a missing or odd field here means "not set" (``None``),
never an exception: one bad field must not stop the other classes' QoS.
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


def class_section(slo: api.NodeSLO, key: str, section: str) -> api.JSONObject:
    """``resourceQOSStrategy.<key>.<section>`` (e.g. ``beClass.memoryQOS``), ``{}`` when absent."""
    cls = slo.resource_qos_strategy.get(key)
    if not isinstance(cls, Mapping):
        return {}
    sec = cls.get(section)
    return sec if isinstance(sec, Mapping) else {}


def enabled(section: api.JSONObject) -> bool:
    return section.get("enable") is True


def get_int(section: api.JSONObject, key: str) -> int | None:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def get_bool(section: api.JSONObject, key: str) -> bool | None:
    value = section.get(key)
    return value if isinstance(value, bool) else None


def net_qos_policy(slo: api.NodeSLO) -> str:
    """``resourceQOSStrategy.policies.netQOSPolicy`` (Koordinator's default ``tc``)."""
    policies = slo.resource_qos_strategy.get("policies")
    value = policies.get("netQOSPolicy") if isinstance(policies, Mapping) else None
    return value if isinstance(value, str) and value else "tc"
