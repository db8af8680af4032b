"""Mid resources of a node: Koordinator's noderesource ``MidResource`` plugin (v1.8), as pure functions.

``kubernetes.io/mid-cpu`` (millicores) and ``mid-memory`` (bytes) lend Mid pods what prod pods hold but do
not use. By default: min(min(prodReclaimable, nodeUnused) + unallocated * midUnallocatedPercent,
capacity * mid{CPU,Memory}ThresholdPercent), with prodReclaimable the NodeMetric's prediction (0 when
absent), nodeUnused capacity minus node usage (0 without usage), unallocated capacity minus the node's
reserve (kubelet's, annotation's, system use with prod host applications: the largest) minus the
requests of pods above Mid. ``midReclaimMode: static``: capacity * ``midStatic*ReservedPercent`` under the
same cap. Products truncate to integers, as Koordinator's quantities do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koord.manager.batchresource import NodeView, ResourceDecision, classify, larger, node_reserved
from koordshared.apis.configuration.slocontroller import DEFAULT_STRATEGY, ColocationStrategy
from koordshared.apis.core import pod as podschema
from koordshared.apis.core.resources import pod_requests
from koordshared.apis.extension import qos as extension
from koordshared.apis.slo.nodemetric import NodeMetricStatus, Usage

MID_CPU = extension.MID_CPU
MID_MEMORY = extension.MID_MEMORY
STATIC = "static"
_BELOW_PROD = (extension.PriorityClass.MID, extension.PriorityClass.BATCH, extension.PriorityClass.FREE)
_ACTIVE_PHASES = ("Running", "Pending")


def _percent(value: int | None, default: int | None) -> float:
    return float(value if value is not None else default or 0) / 100


def prod_allocated(pods: Iterable[Mapping[str, Any]]) -> Usage:
    """The requests of the Running and Pending pods above Mid (a pod of no class counts as prod)."""
    total = Usage()
    for pod in pods:
        if podschema.as_map(pod, "status").get("phase") not in _ACTIVE_PHASES:
            continue
        if classify(pod)[0] in _BELOW_PROD:
            continue
        asked = pod_requests(pod)
        total += Usage(asked.get("cpu", 0), asked.get("memory", 0))
    return total


def _dynamic_msg(
    what: str, value: int, reclaimable: int, unused: int, unallocated: int, ratio: float, cap: int, top: float
) -> str:
    """Koordinator's message of the dynamic mode (memory in bytes here, not rounded GB)."""
    return (
        f"midAllocatable[{what}]:{value} = min(min(ProdReclaimable:{reclaimable}, NodeUnused:{unused}) + "
        f"Unallocated:{unallocated} * midUnallocatedRatio:{ratio:g}, "
        f"NodeCapacity:{cap} * thresholdRatio:{top:g})"
    )


def _static(strategy: ColocationStrategy, cap: Usage) -> ResourceDecision:
    d = DEFAULT_STRATEGY
    cpu_pct = _percent(strategy.mid_static_cpu_reserved_percent, d.mid_static_cpu_reserved_percent)
    mem_pct = _percent(strategy.mid_static_memory_reserved_percent, d.mid_static_memory_reserved_percent)
    cpu_max = _percent(strategy.mid_cpu_threshold_percent, d.mid_cpu_threshold_percent)
    mem_max = _percent(strategy.mid_memory_threshold_percent, d.mid_memory_threshold_percent)
    cpu = min(int(cap.cpu_milli * cpu_pct), int(cap.cpu_milli * cpu_max))
    mem = min(int(cap.memory_bytes * mem_pct), int(cap.memory_bytes * mem_max))
    return ResourceDecision(
        cpu,
        mem,
        f"midAllocatable[CPU(milli-core)]:{cpu} = min(nodeCapacity:{cap.cpu_milli} * staticReservedPercent:"
        f"{cpu_pct:g}, nodeCapacity:{cap.cpu_milli} * thresholdRatio:{cpu_max:g})",
        f"midAllocatable[Memory(Byte)]:{mem} = min(nodeCapacity:{cap.memory_bytes} * staticReservedPercent:"
        f"{mem_pct:g}, nodeCapacity:{cap.memory_bytes} * thresholdRatio:{mem_max:g})",
    )


def calculate(
    strategy: ColocationStrategy,
    node: NodeView,
    pods: Iterable[Mapping[str, Any]],
    metric: NodeMetricStatus,
    *,
    usage_valid: bool,
) -> ResourceDecision:
    """The Mid allocatable of ``node`` (call only when not degraded); ``usage_valid``: the report has
    node usage (Koordinator's ``IsValidNodeUsage``), else nothing counts as unused."""
    cap = node.capacity
    if strategy.mid_reclaim_mode == STATIC:
        return _static(strategy, cap)
    d = DEFAULT_STRATEGY
    reclaimable = metric.prod_reclaimable or Usage()
    prod_hosts = Usage()
    for app in metric.host_application_metric:
        if app.priority == extension.PriorityClass.PROD.value:  # above Mid by default priority
            prod_hosts += app.usage
    system = (metric.system_usage or Usage()) + prod_hosts
    reserved = larger(node_reserved(node), system)
    prod = prod_allocated(pods)
    unallocated = Usage(
        max(cap.cpu_milli - reserved.cpu_milli - prod.cpu_milli, 0),
        max(cap.memory_bytes - reserved.memory_bytes - prod.memory_bytes, 0),
    )
    used = metric.node_usage if usage_valid and metric.node_usage is not None else None
    unused = Usage(cap.cpu_milli - used.cpu_milli, cap.memory_bytes - used.memory_bytes) if used else Usage()
    ratio = _percent(strategy.mid_unallocated_percent, d.mid_unallocated_percent)
    cpu = max(min(reclaimable.cpu_milli, unused.cpu_milli), 0) + int(unallocated.cpu_milli * ratio)
    mem = max(min(reclaimable.memory_bytes, unused.memory_bytes), 0) + int(unallocated.memory_bytes * ratio)
    cpu_max = _percent(strategy.mid_cpu_threshold_percent, d.mid_cpu_threshold_percent)
    mem_max = _percent(strategy.mid_memory_threshold_percent, d.mid_memory_threshold_percent)
    cpu = min(cpu, int(cap.cpu_milli * cpu_max))
    mem = min(mem, int(cap.memory_bytes * mem_max))
    return ResourceDecision(
        cpu,
        mem,
        _dynamic_msg(
            "CPU(milli-core)",
            cpu,
            reclaimable.cpu_milli,
            unused.cpu_milli,
            unallocated.cpu_milli,
            ratio,
            cap.cpu_milli,
            cpu_max,
        ),
        _dynamic_msg(
            "Memory(Byte)",
            mem,
            reclaimable.memory_bytes,
            unused.memory_bytes,
            unallocated.memory_bytes,
            ratio,
            cap.memory_bytes,
            mem_max,
        ),
    )
