"""Batch resources of a node: Koordinator's noderesource ``BatchResource`` plugin, as pure functions.

``kubernetes.io/batch-cpu`` (millicores) and ``kubernetes.io/batch-memory`` (bytes) are what the node can lend
to batch pods: capacity minus a safety margin, minus what the system uses, minus what the high-priority pods
use or request (by policy); never below zero and at most the configured share of capacity. The result is
dropped when the NodeMetric is stale or colocation is off for the node. Details: ``docs/modules.md``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.configuration.slocontroller import (
    CALCULATE_BY_MAX_USAGE_REQUEST,
    CALCULATE_BY_REQUEST,
    ColocationStrategy,
)
from koordshared.apis.core import pod as podschema
from koordshared.apis.core.resources import pod_requests
from koordshared.apis.extension import qos as extension
from koordshared.apis.meta import cpulist
from koordshared.apis.meta.quantity import to_int, to_milli
from koordshared.apis.slo.nodemetric import NodeMetricStatus, Usage
from koordshared.runtime.errors import InvalidValue

BATCH_CPU = extension.BATCH_CPU
BATCH_MEMORY = extension.BATCH_MEMORY
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
_LOW_PRIORITY = (extension.PriorityClass.BATCH, extension.PriorityClass.FREE)
_HOST_APP_HIGH = (extension.PriorityClass.PROD.value, extension.PriorityClass.MID.value)
"""Host applications above batch priority (Koordinator compares the classes' default priority values)."""
_ACTIVE_PHASES = ("Running", "Pending")


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the calculation reads of a Node: CPU in millicores, memory in bytes."""

    name: str
    capacity: Usage
    allocatable: Usage
    annotations: Mapping[str, str]
    batch_capacity: tuple[int | None, int | None]
    """The batch-cpu/batch-memory now in ``status.allocatable`` (``None``: absent)."""
    mid_capacity: tuple[int | None, int | None] = (None, None)
    """The mid-cpu/mid-memory now in ``status.allocatable``."""


@dataclass(frozen=True, slots=True)
class ResourceDecision:
    """A decision for one pair of extended resources (batch or mid): ``cpu``/``memory`` ``None`` means
    "remove the resource" (reset or degraded)."""

    cpu: int | None
    memory: int | None
    cpu_msg: str = ""
    memory_msg: str = ""


def _usage(values: Mapping[str, Any]) -> Usage:
    def one(name: str, milli: bool) -> int:
        raw = values.get(name)
        try:
            return (to_milli(raw) if milli else to_int(raw)) if raw is not None else 0
        except (InvalidValue, TypeError):
            return 0

    return Usage(one("cpu", True), one("memory", False))


def amount(values: Mapping[str, Any], name: str) -> int | None:
    """The integer value of ``values[name]`` (``None``: absent or unparsable)."""
    raw = values.get(name)
    if raw is None:
        return None
    try:
        return to_int(raw)
    except (InvalidValue, TypeError):
        return None


def node_view(node: Mapping[str, Any]) -> NodeView:
    meta, status = podschema.as_map(node, "metadata"), podschema.as_map(node, "status")
    capacity, allocatable = podschema.as_map(status, "capacity"), podschema.as_map(status, "allocatable")
    return NodeView(
        name=str(meta.get("name", "")),
        capacity=_usage(capacity),
        allocatable=_usage(allocatable),
        annotations=podschema.str_map(podschema.as_map(meta, "annotations")),
        batch_capacity=(amount(allocatable, BATCH_CPU), amount(allocatable, BATCH_MEMORY)),
        mid_capacity=(amount(allocatable, extension.MID_CPU), amount(allocatable, extension.MID_MEMORY)),
    )


def _max(a: Usage, b: Usage) -> Usage:
    return Usage(max(a.cpu_milli, b.cpu_milli), max(a.memory_bytes, b.memory_bytes))


def _minus(a: Usage, *bs: Usage) -> Usage:
    cpu, mem = a.cpu_milli, a.memory_bytes
    for b in bs:
        cpu, mem = cpu - b.cpu_milli, mem - b.memory_bytes
    return Usage(max(cpu, 0), max(mem, 0))


def annotation_reserved(annotations: Mapping[str, str]) -> Usage:
    """``node.koordinator.sh/reservation``: ``resources`` and/or ``reservedCPUs`` (a cpuset, whole CPUs)."""
    raw = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return Usage()
    try:
        doc = json.loads(raw)
    except ValueError:
        return Usage()
    if not isinstance(doc, Mapping):
        return Usage()
    resources = doc.get("resources")
    reserved = _usage(resources) if isinstance(resources, Mapping) else Usage()
    cpus = doc.get("reservedCPUs")
    if isinstance(cpus, str) and cpus:
        try:
            count = len(cpulist.parse_cpuset(cpus, resource="reservedCPUs"))
        except InvalidValue:
            return Usage()  # Koordinator drops the whole reservation when the cpuset does not parse
        reserved = Usage(count * 1000, reserved.memory_bytes)
    return reserved


def node_reserved(node: NodeView) -> Usage:
    """What the kubelet (capacity minus allocatable) or the reservation annotation holds back, the larger
    of both per resource (Koordinator takes the max too, and says so is confusing)."""
    return _max(_minus(node.capacity, node.allocatable), annotation_reserved(node.annotations))


def larger(a: Usage, b: Usage) -> Usage:
    """Per resource, the larger of ``a`` and ``b`` (``quotav1.Max``)."""
    return _max(a, b)


def classify(pod: Mapping[str, Any]) -> tuple[extension.PriorityClass, extension.QOSClass]:
    meta, spec = podschema.as_map(pod, "metadata"), podschema.as_map(pod, "spec")
    labels = podschema.str_map(podschema.as_map(meta, "labels"))
    qos = extension.qos_of(labels, podschema.kube_qos_of(pod))
    raw = spec.get("priority")
    priority = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    return extension.priority_class_of(labels, priority, qos), qos


@dataclass(frozen=True, slots=True)
class HighPriorityLoad:
    """Sums over the high-priority pods: requests, usage, and per-pod max(usage, request)."""

    request: Usage
    used: Usage
    max_used_request: Usage


def high_priority_load(pods: Iterable[Mapping[str, Any]], metric: NodeMetricStatus) -> HighPriorityLoad:
    by_key = {f"{p.namespace}/{p.name}": p for p in metric.pods_metric}
    dangling = dict(by_key)
    request, used, max_used = Usage(), Usage(), Usage()
    for pod in pods:
        phase = podschema.as_map(pod, "status").get("phase") or "Pending"
        if phase not in _ACTIVE_PHASES:
            continue
        key = podschema.pod_key(pod)
        pod_metric = dangling.pop(key, None) or by_key.get(key)
        priority, qos = classify(pod)
        if priority in _LOW_PRIORITY:
            continue
        asked = pod_requests(pod)
        req = Usage(asked.get("cpu", 0), asked.get("memory", 0))
        request += req
        if pod_metric is None:
            used += req
            max_used += req
        elif qos is extension.QOSClass.LSE:
            # LSE pods hold their CPUs exclusively: count the request for CPU, the usage for memory.
            used += Usage(req.cpu_milli, pod_metric.usage.memory_bytes)
            max_used += _max(req, pod_metric.usage)
        else:
            used += pod_metric.usage
            max_used += _max(req, pod_metric.usage)
    for pod_metric in dangling.values():
        # Reported but not in the pod list (deleted since, or never seen by this cache): still running.
        if pod_metric.priority in (p.value for p in _LOW_PRIORITY):
            continue
        used += pod_metric.usage
        max_used += pod_metric.usage
    return HighPriorityLoad(request, used, max_used)


def is_degraded(metric: NodeMetricStatus | None, strategy: ColocationStrategy, now: float) -> bool:
    """The NodeMetric is missing, never reported, or older than ``degradeTimeMinutes``."""
    if metric is None or metric.update_time is None:
        return True
    return now > metric.update_time + 60.0 * (strategy.degrade_time_minutes or 0)


def calculate(
    strategy: ColocationStrategy,
    node: NodeView,
    pods: Iterable[Mapping[str, Any]],
    metric: NodeMetricStatus,
) -> ResourceDecision:
    """``CalculateBatchResourceByPolicy`` for one node (call only when not degraded)."""
    cap = node.capacity
    cpu_reclaim = strategy.cpu_reclaim_threshold_percent or 0
    mem_reclaim = strategy.memory_reclaim_threshold_percent or 0
    # MultiplyMilliQuant / MultiplyQuant: float product truncated to an integer.
    margin = Usage(
        int(cap.cpu_milli * ((100 - cpu_reclaim) / 100.0)),
        int(cap.memory_bytes * ((100 - mem_reclaim) / 100.0)),
    )
    host_apps = Usage()
    for app in metric.host_application_metric:
        if app.priority in _HOST_APP_HIGH:
            host_apps += app.usage
    reserved = node_reserved(node)
    system = _max((metric.system_usage or Usage()) + host_apps, reserved)
    hp = high_priority_load(pods, metric)
    by_usage = _minus(cap, margin, system, hp.used)
    by_request = _minus(cap, margin, reserved, hp.request)
    by_max = _minus(cap, margin, system, hp.max_used_request)

    if strategy.cpu_calculate_policy == CALCULATE_BY_MAX_USAGE_REQUEST:
        cpu, cpu_hp, cpu_what = by_max.cpu_milli, hp.max_used_request.cpu_milli, "podHPMaxUsedRequest"
    else:
        cpu, cpu_hp, cpu_what = by_usage.cpu_milli, hp.used.cpu_milli, "podHPUsed"
    cpu_msg = (
        f"batchAllocatable[CPU(Milli-Core)]:{{}} = nodeCapacity:{cap.cpu_milli} - nodeSafetyMargin:"
        f"{margin.cpu_milli} - systemUsageOrNodeReserved:{system.cpu_milli} - {cpu_what}:{cpu_hp}"
    )
    if strategy.batch_cpu_threshold_percent is not None:
        ratio = strategy.batch_cpu_threshold_percent / 100.0
        cpu = min(cpu, int(cap.cpu_milli * ratio))
        cpu_msg = f"min(nodeCapacity:{cap.cpu_milli} * thresholdRatio:{ratio}, {cpu_msg})"

    mem_policy = strategy.memory_calculate_policy
    if mem_policy == CALCULATE_BY_REQUEST:
        mem, mem_sys, mem_hp, mem_what = by_request.memory_bytes, reserved, hp.request, "podHPRequest"
    elif mem_policy == CALCULATE_BY_MAX_USAGE_REQUEST:
        mem, mem_sys, mem_hp = by_max.memory_bytes, system, hp.max_used_request
        mem_what = "podHPMaxUsedRequest"
    else:
        mem, mem_sys, mem_hp, mem_what = by_usage.memory_bytes, system, hp.used, "podHPUsed"
    mem_msg = (
        f"batchAllocatable[Memory(Byte)]:{{}} = nodeCapacity:{cap.memory_bytes} - nodeSafetyMargin:"
        f"{margin.memory_bytes} - system:{mem_sys.memory_bytes} - {mem_what}:{mem_hp.memory_bytes}"
    )
    if strategy.batch_memory_threshold_percent is not None:
        ratio = strategy.batch_memory_threshold_percent / 100.0
        mem = min(mem, int(cap.memory_bytes * ratio))
        mem_msg = f"min(nodeCapacity:{cap.memory_bytes} * thresholdRatio:{ratio}, {mem_msg})"
    return ResourceDecision(cpu, mem, cpu_msg.format(cpu), mem_msg.format(mem))


def is_diff(old: int | None, new: int | None, threshold: float) -> bool:
    """``util.IsResourceDiff``: presence changed, or ``|new - old| > old * threshold`` (in millis)."""
    if (old is None) != (new is None):
        return True
    if old is None or new is None:
        return False
    return abs(new - old) > old * threshold
