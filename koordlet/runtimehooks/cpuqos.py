"""The NodeSLO's CPU QoS as GroupIdentity and CoreSched read it: ``resourceQOSStrategy.<class>.cpuQOS`` and
``resourceQOSStrategy.policies.cpuPolicy`` (the agent has merged the NodeSLO over Koordinator's defaults, so
an absent field is "not set"), and which class section a pod follows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordlet import api

CLASSES = ("lsrClass", "lsClass", "beClass")
CLASS_OF: Mapping[api.QOSClass, str] = {
    api.QOSClass.LSE: "lsrClass",  # LSE pods follow the LSR class, as in Koordinator
    api.QOSClass.LSR: "lsrClass",
    api.QOSClass.LS: "lsClass",
    api.QOSClass.BE: "beClass",
}


def cpu_policy(slo: api.NodeSLO) -> str | None:
    """``policies.cpuPolicy`` (``groupIdentity``, ``coreSched``); ``None`` when not set."""
    policies = slo.resource_qos_strategy.get("policies")
    value = policies.get("cpuPolicy") if isinstance(policies, Mapping) else None
    return value if isinstance(value, str) and value else None


def cpu_qos(slo: api.NodeSLO, key: str) -> Mapping[str, Any]:
    """``<key>.cpuQOS`` (``{}`` when absent)."""
    cls = slo.resource_qos_strategy.get(key)
    section = cls.get("cpuQOS") if isinstance(cls, Mapping) else None
    return section if isinstance(section, Mapping) else {}
