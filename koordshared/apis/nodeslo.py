"""NodeSLO spec defaults, merge and the typed view (schema layer: agent and cluster side).

The merge is Koordinator's: each section of the spec is laid over the default section and only fields
that are present and not ``null`` override. The agent applies it to the NodeSLO it reads; the manager
renders NodeSLOs with the same defaults, so both sides agree on what an absent field means. Validation
lives in :mod:`koordshared.apis.slovalidate`; unknown fields are ignored with a debug line, as the API
server would prune them.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from koordshared.apis import extension, quantity, slo
from koordshared.apis.slovalidate import InvalidNodeSLO, check_merged, validate_spec

__all__ = ["InvalidNodeSLO", "build", "default_spec", "merge", "validate_spec"]

log = logging.getLogger(__name__)

_NONE_CPU_QOS = {"groupIdentity": 0, "schedIdle": 0, "coreExpeller": False}
_NONE_RESCTRL_QOS = {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100}
_NONE_MEMORY_QOS = {
    "minLimitPercent": 0,
    "lowLimitPercent": 0,
    "throttlingPercent": 0,
    "wmarkRatio": 0,
    "wmarkScalePermill": 50,
    "wmarkMinAdj": 0,
    "priorityEnable": 0,
    "priority": 0,
    "oomKillGroup": 0,
}


def _qos_class(gi: int, core_expeller: bool, cat_end: int, wmark_ratio: int, permill: int, adj: int) -> Any:
    return {
        "cpuQOS": {"enable": False, "groupIdentity": gi, "schedIdle": 0, "coreExpeller": core_expeller},
        "resctrlQOS": {
            "enable": False,
            "catRangeStartPercent": 0,
            "catRangeEndPercent": cat_end,
            "mbaPercent": 100,
        },
        "memoryQOS": {
            "enable": False,
            **_NONE_MEMORY_QOS,
            "wmarkRatio": wmark_ratio,
            "wmarkScalePermill": permill,
            "wmarkMinAdj": adj,
        },
        "blkioQOS": {"enable": False, "blocks": []},
        "networkQOS": {
            "enable": False,
            "ingressRequest": 0,
            "ingressLimit": 0,
            "egressRequest": 0,
            "egressLimit": 0,
        },
    }


def default_spec() -> dict[str, Any]:
    """Koordinator's ``DefaultNodeSLOSpecConfig`` (fields that default to nil are absent)."""
    return {
        "resourceUsedThresholdWithBE": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
            "lsrClass": _qos_class(2, True, 100, 95, 20, -25),
            "lsClass": _qos_class(2, True, 100, 95, 20, -25),
            "beClass": _qos_class(-1, False, 30, 95, 20, 50),
            "systemClass": _qos_class(0, False, 100, 0, 50, 0),
            "cgroupRoot": _qos_class(0, False, 100, 0, 50, 0),
        },
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
        "hostApplications": [],
        "extensions": {},
    }


def merge(base: Any, over: Any) -> Any:
    """``over`` laid onto ``base``: mappings merge key by key, ``null`` keeps the base, other values
    (lists included) replace it. Inputs are not modified."""
    if over is None:
        return copy.deepcopy(base)
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = {k: copy.deepcopy(v) for k, v in base.items()}
        for key, value in over.items():
            out[key] = merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(over)


def _fields(cls: type[Any], sec: Mapping[str, Any]) -> dict[str, Any]:
    known, unknown = slo.json_fields(cls, sec)
    for key in unknown:
        log.debug("NodeSLO: ignoring unknown field %s", key)
    return known


def _host_app(app: Mapping[str, Any]) -> slo.HostApplication:
    cg = app.get("cgroupPath") or {}
    return slo.HostApplication(
        name=str(app["name"]),
        priority=extension.PriorityClass(app.get("priority") or ""),
        qos=extension.QOSClass(app.get("qos") or ""),
        cgroup_base=str(cg.get("base") or ""),
        cgroup_parent_dir=str(cg.get("parentDir") or ""),
        cgroup_relative_path=str(cg.get("relativePath") or ""),
    )


def _disable_off_sections(qos: dict[str, Any]) -> None:
    # Koordinator replaces a disabled sub-config by its "None" values so plugins see neutral settings.
    for cls in ("lsrClass", "lsClass", "beClass"):
        section = qos.get(cls)
        if not isinstance(section, dict):
            continue
        for key, neutral in (
            ("cpuQOS", _NONE_CPU_QOS),
            ("resctrlQOS", _NONE_RESCTRL_QOS),
            ("memoryQOS", _NONE_MEMORY_QOS),
        ):
            sub = section.get(key)
            if isinstance(sub, dict) and sub.get("enable") is False:
                sub.update(neutral)


_NETWORK_FIELDS = {
    "ingressRequest": "ingress_request_bps",
    "ingressLimit": "ingress_limit_bps",
    "egressRequest": "egress_request_bps",
    "egressLimit": "egress_limit_bps",
}


def bandwidth_bps(value: Any, total_bps: int) -> int:
    """Koordinator's IntOrString bandwidth: an integer or a ``"N%"`` string is a percent of ``total_bps``,
    another string a quantity in bits per second (validation has refused anything else). Koordinator's
    agent reads ``"50%"`` as an unparsable quantity, 0; the IntOrString convention is a percent."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        value = int(value[:-1])
    if isinstance(value, int):
        return total_bps * value // 100
    return quantity.to_int(str(value))


def _network_qos(net: Mapping[str, Any], total_bps: int) -> slo.NetworkQOS:
    values = {attr: bandwidth_bps(net.get(f), total_bps) for f, attr in _NETWORK_FIELDS.items()}
    return slo.NetworkQOS(enable=net.get("enable") is True, **values)


def _class(section: Mapping[str, Any], total_bps: int) -> slo.ResourceQOS:
    def sub(key: str) -> Mapping[str, Any]:
        value = section.get(key)
        return value if isinstance(value, Mapping) else {}

    blkio = sub("blkioQOS")
    return slo.ResourceQOS(
        cpu_qos=slo.CPUQOS(**_fields(slo.CPUQOS, sub("cpuQOS"))),
        resctrl_qos=slo.ResctrlQOS(**_fields(slo.ResctrlQOS, sub("resctrlQOS"))),
        memory_qos=slo.MemoryQOS(**_fields(slo.MemoryQOS, sub("memoryQOS"))),
        blkio_qos=slo.BlkIOQOS(enable=blkio.get("enable") is True, blocks=slo.blocks(blkio.get("blocks"))),
        network_qos=_network_qos(sub("networkQOS"), total_bps),
    )


def _resource_qos(qos: Mapping[str, Any], total_bps: int) -> slo.ResourceQOSStrategy:
    policies = qos.get("policies") or {}
    classes = {slo.snake(key): _class(qos.get(key) or {}, total_bps) for key in slo.CLASS_KEYS}
    return slo.ResourceQOSStrategy(
        policies=slo.ResourceQOSPolicies(**_fields(slo.ResourceQOSPolicies, policies)), **classes
    )


def _system(sec: Mapping[str, Any]) -> slo.SystemStrategy:
    known, _ = slo.json_fields(slo.SystemStrategy, sec)  # totalNetworkBandwidth is read apart
    features = sec.get("schedFeatures") or {}
    return slo.SystemStrategy(**known, sched_features=dict(features))


def build(spec: Mapping[str, Any] | None, generation: int = 0) -> slo.NodeSLO:
    """Validate ``spec`` and merge it over the defaults (``None`` -> the defaults)."""
    if spec is not None:
        validate_spec(spec)
    merged = merge(default_spec(), spec or {})
    qos = merged["resourceQOSStrategy"]
    _disable_off_sections(qos)
    thresholds = slo.ResourceThresholdStrategy(
        **_fields(slo.ResourceThresholdStrategy, merged["resourceUsedThresholdWithBE"])
    )
    check_merged(thresholds)
    total_bps = quantity.to_int(str(merged["systemStrategy"].get("totalNetworkBandwidth") or 0))
    resource_qos = _resource_qos(qos, total_bps)
    return slo.NodeSLO(
        resource_used_threshold_with_be=thresholds,
        cpu_burst_strategy=slo.CPUBurstStrategy(**_fields(slo.CPUBurstStrategy, merged["cpuBurstStrategy"])),
        resource_qos=resource_qos,
        system=_system(merged["systemStrategy"]),
        resource_qos_strategy=qos,
        system_strategy=merged["systemStrategy"],
        host_applications=tuple(_host_app(a) for a in merged.get("hostApplications") or ()),
        extensions=merged.get("extensions") or {},
        total_network_bandwidth_bps=total_bps,
        network_qos={key: resource_qos.of(key).network_qos for key in slo.CLASS_KEYS},
        generation=generation,
    )
