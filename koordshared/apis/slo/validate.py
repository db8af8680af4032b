"""NodeSLO spec validation: refuse what could make a QoS plugin act on nonsense (schema layer).

Percentages outside 0..100, lower bounds not below their upper ones, BE satisfaction bounds outside
koordlet's accepted range, unknown policies, wrong JSON types and unsafe host-application cgroup paths
are all reported at once, so one Event tells the operator everything that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from koordshared.apis.extension import qos as extension
from koordshared.apis.meta import quantity
from koordshared.runtime.errors import InvalidValue


class InvalidNodeSLO(ValueError):
    """A NodeSLO spec that must not take effect; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def section(self, spec: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = spec.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problems.append(f"{key}: must be an object, got {type(value).__name__}")
            return {}
        return value

    def boolean(self, sec: Mapping[str, Any], path: str, key: str) -> None:
        if sec.get(key) is not None and not isinstance(sec[key], bool):
            self.problems.append(f"{path}.{key}: must be a boolean, got {sec[key]!r}")

    def integer(self, sec: Mapping[str, Any], path: str, key: str, low: int, high: int | None) -> int | None:
        value = sec.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            self.problems.append(f"{path}.{key}: must be an integer, got {value!r}")
            return None
        if value < low or (high is not None and value > high):
            self.problems.append(
                f"{path}.{key}: {value} outside [{low}, {high if high is not None else '∞'}]"
            )
            return None
        return value

    def percent(self, sec: Mapping[str, Any], path: str, key: str) -> int | None:
        return self.integer(sec, path, key, 0, 100)

    def enum(self, sec: Mapping[str, Any], path: str, key: str, allowed: tuple[str, ...]) -> None:
        value = sec.get(key)
        if value is not None and value not in allowed:
            self.problems.append(f"{path}.{key}: {value!r} not one of {list(allowed)}")

    def int_or_quantity(self, sec: Mapping[str, Any], path: str, key: str) -> None:
        """Koordinator's IntOrString bandwidth: an integer percent (0..100), a percent string (``"50%"``,
        the IntOrString convention; Koordinator's agent reads it as 0) or a quantity string."""
        value = sec.get(key)
        if value is None or (isinstance(value, str) and _quantity_ok(value)):
            return
        if isinstance(value, str) and value.endswith("%"):
            digits = value[:-1]
            if not (digits.isdecimal() and 0 <= int(digits) <= 100):
                self.problems.append(f"{path}.{key}: {value!r} is not a percent from 0% to 100%")
        elif isinstance(value, str):
            self.problems.append(f"{path}.{key}: {value!r} is not a quantity (e.g. 50M) or a percent (50%)")
        else:
            self.percent(sec, path, key)

    def below(self, path: str, low_key: str, low: int | None, high_key: str, high: int | None) -> None:
        if low is not None and high is not None and low >= high:
            self.problems.append(f"{path}: {low_key} ({low}) must be below {high_key} ({high})")


_RT = "resourceUsedThresholdWithBE"


def _check_thresholds(c: _Checker, sec: Mapping[str, Any]) -> None:
    c.boolean(sec, _RT, "enable")
    # A threshold of 0 would suppress BE to nothing and evict on any use: refused like koordlet's plugins.
    c.integer(sec, _RT, "cpuSuppressThresholdPercent", 1, 100)
    c.percent(sec, _RT, "cpuSuppressMinPercent")  # not above the threshold: nodeslo's _check_merged
    c.enum(sec, _RT, "cpuSuppressPolicy", ("cpuset", "cfsQuota"))
    c.enum(sec, _RT, "cpuEvictPolicy", ("evictByRealLimit", "evictByAllocatable"))
    for prefix in ("memoryEvict", "cpuEvict"):
        high = c.integer(sec, _RT, f"{prefix}ThresholdPercent", 1, 100)
        low = c.percent(sec, _RT, f"{prefix}LowerPercent")
        c.below(_RT, f"{prefix}LowerPercent", low, f"{prefix}ThresholdPercent", high)
    for prefix in ("memoryAllocatableEvict", "cpuAllocatableEvict"):
        # Allocatable-based thresholds may exceed 100 (Koordinator documents 110 as an example).
        high = c.integer(sec, _RT, f"{prefix}ThresholdPercent", 0, 1000)
        low = c.integer(sec, _RT, f"{prefix}LowerPercent", 0, 1000)
        c.below(_RT, f"{prefix}LowerPercent", low, f"{prefix}ThresholdPercent", high)
    lower = c.percent(sec, _RT, "cpuEvictBESatisfactionLowerPercent")
    upper = c.percent(sec, _RT, "cpuEvictBESatisfactionUpperPercent")
    # koordlet's cpuevict bounds: 0 < lower <= 60 and lower <= upper < 100, else the strategy misfires.
    if lower is not None and not 0 < lower <= 60:
        c.problems.append(f"{_RT}.cpuEvictBESatisfactionLowerPercent: {lower} outside (0, 60]")
    if upper is not None and upper >= 100:
        c.problems.append(f"{_RT}.cpuEvictBESatisfactionUpperPercent: {upper} must be below 100")
    if lower is not None and upper is not None and lower > upper:
        c.problems.append(f"{_RT}: BE satisfaction lower ({lower}) above upper ({upper})")
    c.integer(sec, _RT, "cpuEvictBEUsageThresholdPercent", 1, 100)
    c.integer(sec, _RT, "cpuEvictTimeWindowSeconds", 1, None)
    c.integer(sec, _RT, "evictEnabledPriorityThreshold", 0, None)
    c.integer(sec, _RT, "allocatableEvictPriorityThreshold", 0, 7999)


_QOS_CLASSES = ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")


def _check_qos(c: _Checker, sec: Mapping[str, Any]) -> None:
    path = "resourceQOSStrategy"
    policies = c.section(sec, "policies")
    c.enum(policies, f"{path}.policies", "cpuPolicy", ("groupIdentity", "coreSched"))
    c.enum(policies, f"{path}.policies", "netQOSPolicy", ("tc", "terway-qos"))
    for cls in _QOS_CLASSES:
        qos = c.section(sec, cls)
        p = f"{path}.{cls}"
        cpu = c.section(qos, "cpuQOS")
        c.boolean(cpu, f"{p}.cpuQOS", "enable")
        c.integer(cpu, f"{p}.cpuQOS", "groupIdentity", -1, 2)
        c.integer(cpu, f"{p}.cpuQOS", "schedIdle", 0, 1)
        resctrl = c.section(qos, "resctrlQOS")
        start = c.percent(resctrl, f"{p}.resctrlQOS", "catRangeStartPercent")
        end = c.percent(resctrl, f"{p}.resctrlQOS", "catRangeEndPercent")
        c.below(f"{p}.resctrlQOS", "catRangeStartPercent", start, "catRangeEndPercent", end)
        c.percent(resctrl, f"{p}.resctrlQOS", "mbaPercent")
        mem = c.section(qos, "memoryQOS")
        for key in ("minLimitPercent", "lowLimitPercent", "throttlingPercent", "wmarkRatio"):
            c.percent(mem, f"{p}.memoryQOS", key)
        c.integer(mem, f"{p}.memoryQOS", "wmarkScalePermill", 0, 1000)
        c.integer(mem, f"{p}.memoryQOS", "wmarkMinAdj", -25, 50)
        net = c.section(qos, "networkQOS")
        c.boolean(net, f"{p}.networkQOS", "enable")
        for key in ("ingressRequest", "ingressLimit", "egressRequest", "egressLimit"):
            c.int_or_quantity(net, f"{p}.networkQOS", key)
        blkio = c.section(qos, "blkioQOS")
        c.boolean(blkio, f"{p}.blkioQOS", "enable")
        _check_blocks(c, blkio.get("blocks"), f"{p}.blkioQOS.blocks")


_IO_FIELDS = (
    "readIOPS",
    "writeIOPS",
    "readBPS",
    "writeBPS",
    "readLatency",
    "writeLatency",
    "modelReadBPS",
    "modelWriteBPS",
    "modelReadSeqIOPS",
    "modelWriteSeqIOPS",
    "modelReadRandIOPS",
    "modelWriteRandIOPS",
)


def _check_blocks(c: _Checker, blocks: Any, path: str) -> None:
    if blocks is None:
        return
    if not isinstance(blocks, list):
        c.problems.append(f"{path}: must be a list")
        return
    for i, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            c.problems.append(f"{path}[{i}]: must be an object")
            continue
        c.enum(block, f"{path}[{i}]", "type", ("device", "volumegroup", "podvolume"))
        io = c.section(block, "ioCfg")
        for key in _IO_FIELDS:
            c.integer(io, f"{path}[{i}].ioCfg", key, 0, None)
        c.integer(io, f"{path}[{i}].ioCfg", "ioWeightPercent", 1, 100)
        c.percent(io, f"{path}[{i}].ioCfg", "readLatencyPercent")
        c.percent(io, f"{path}[{i}].ioCfg", "writeLatencyPercent")
        c.boolean(io, f"{path}[{i}].ioCfg", "enableUserModel")


def _check_system(c: _Checker, sec: Mapping[str, Any]) -> None:
    path = "systemStrategy"
    for key in ("minFreeKbytesFactor", "watermarkScaleFactor", "schedIdleSaverWmark"):
        c.integer(sec, path, key, 0, None)
    for key in ("memcgReapBackGround", "schedGroupIdentityEnabled", "pageCacheLimitEnabled"):
        c.integer(sec, path, key, 0, 1)
    features = sec.get("schedFeatures")
    good = isinstance(features, Mapping) and all(
        isinstance(k, str) and _FEATURE.match(k) and isinstance(v, bool) for k, v in features.items()
    )
    if features is not None and not good:
        c.problems.append(f"{path}.schedFeatures: must map scheduler feature names (A_Z) to booleans")
    total = sec.get("totalNetworkBandwidth")
    if total is not None and not _quantity_ok(total):
        c.problems.append(f"{path}.totalNetworkBandwidth: {total!r} is not a quantity")


_FEATURE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")


def _quantity_ok(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return False
    try:
        return quantity.to_int(value) >= 0
    except InvalidValue:
        return False


def _check_burst(c: _Checker, sec: Mapping[str, Any]) -> None:
    path = "cpuBurstStrategy"
    c.enum(sec, path, "policy", ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"))
    c.integer(sec, path, "cpuBurstPercent", 0, None)
    c.integer(sec, path, "cfsQuotaBurstPercent", 100, None)
    c.integer(sec, path, "cfsQuotaBurstPeriodSeconds", -1, None)
    c.percent(sec, path, "sharePoolThresholdPercent")


_PRIORITIES = tuple(p.value for p in extension.PriorityClass)
_QOS_NAMES = tuple(q.value for q in extension.QOSClass)
_CGROUP_BASES = ("CgroupRoot", "Kubepods", "KubepodsBurstable", "KubepodsBesteffort")
_SAFE_REL = re.compile(r"^[A-Za-z0-9_.:@-]+(?:/[A-Za-z0-9_.:@-]+)*\Z")


def _check_host_apps(c: _Checker, apps: Any) -> None:
    if apps is None:
        return
    if not isinstance(apps, list):
        c.problems.append("hostApplications: must be a list")
        return
    for i, app in enumerate(apps):
        p = f"hostApplications[{i}]"
        if not isinstance(app, Mapping) or not isinstance(app.get("name"), str) or not app["name"]:
            c.problems.append(f"{p}: needs a non-empty name")
            continue
        c.enum(app, p, "priority", _PRIORITIES)
        c.enum(app, p, "qos", _QOS_NAMES)
        cg = c.section(app, "cgroupPath")
        c.enum(cg, f"{p}.cgroupPath", "base", _CGROUP_BASES)
        for key in ("parentDir", "relativePath"):
            value = cg.get(key)
            # These become cgroup paths later: refuse '..' and odd characters here, not at write time.
            if value and (
                not isinstance(value, str) or ".." in value or not _SAFE_REL.match(value.strip("/"))
            ):
                c.problems.append(f"{p}.cgroupPath.{key}: unsafe path {value!r}")


def validate_spec(spec: Any) -> None:
    """Raise :class:`InvalidNodeSLO` listing every problem of ``spec`` (before the merge)."""
    if not isinstance(spec, Mapping):
        raise InvalidNodeSLO([f"spec must be an object, got {type(spec).__name__}"])
    c = _Checker()
    _check_thresholds(c, c.section(spec, _RT))
    _check_qos(c, c.section(spec, "resourceQOSStrategy"))
    _check_burst(c, c.section(spec, "cpuBurstStrategy"))
    _check_system(c, c.section(spec, "systemStrategy"))
    c.section(spec, "extensions")
    _check_host_apps(c, spec.get("hostApplications"))
    if c.problems:
        raise InvalidNodeSLO(c.problems)
