"""The priority-based eviction tasks' arithmetic: victims by priority, pod requests by priority class, and
the allocatable and usage release targets (Koordinator's ``cpu_evict.go`` and ``memory_evict.go``:
``getPodEvictInfoAndSortByPriority``, ``calculateMilliReleaseByAllocatableThresholdPercent``,
``calculateReleaseByAllocatableThresholdPercent``, ``calculateMilliReleaseByUsedThresholdPercent``;
``util/evict.go``: ``GetRequestTypeAndValueFromPod``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from koordlet import api
from qosplugins import _evict, _shared

EVICTION_PRIORITY_ANNOTATION = "koordinator.sh/eviction-priority"
PRIORITY_LABEL = "koordinator.sh/priority"
CPU, MEMORY = "cpu", "memory"
PodRelease = Callable[[api.PodInfo], Mapping[str, float]]
_RESOURCES: Mapping[str, Mapping[api.PriorityClass, str]] = {
    CPU: {api.PriorityClass.MID: api.MID_CPU, api.PriorityClass.BATCH: api.BATCH_CPU},
    MEMORY: {api.PriorityClass.MID: api.MID_MEMORY, api.PriorityClass.BATCH: api.BATCH_MEMORY},
}


def _int32(text: str | None, default: int) -> int:
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        return default
    return value if -(2**31) <= value < 2**31 else default


def eviction_priority(pod: api.PodInfo) -> int:
    """``koordinator.sh/eviction-priority`` (0 when absent or not an int32)."""
    return _int32(pod.annotations.get(EVICTION_PRIORITY_ANNOTATION), 0)


def label_priority(pod: api.PodInfo) -> int:
    """``koordinator.sh/priority`` (the pod's priority value when absent or not a number)."""
    return _int32(pod.labels.get(PRIORITY_LABEL), pod.priority_value)


def request(pod: api.PodInfo, kind: str) -> tuple[str, int]:
    """``(resource, amount)`` the pod requests of ``kind`` (``cpu``: millicores, ``memory``: bytes)."""
    resource = _RESOURCES[kind].get(pod.priority_class, kind)
    total = 0
    for c in pod.running_containers():
        if resource == kind:
            value = c.cpu_request_milli if kind == CPU else c.memory_request_bytes
        elif resource in (api.MID_CPU, api.MID_MEMORY):
            value = c.mid_cpu_request_milli if kind == CPU else c.mid_memory_request_bytes
        else:
            value = c.batch_cpu_request_milli if kind == CPU else c.batch_memory_request_bytes
        total += max(value, 0)
    return resource, total


def victims(
    ctx: api.PluginContext, gate: str, threshold: int, usage_metric: str, by_request: str | None
) -> tuple[list[api.PodInfo], dict[str, float]]:
    """The priority-ordered victims of ``gate`` and each one's last usage (``usage_metric``: cores, read
    as millicores, or bytes), sub-sorted by usage or, with ``by_request`` (a kind), by that request."""
    window = 2 * ctx.agent.collect_interval
    used: dict[str, float] = {}
    keyed: list[tuple[tuple[int, int, int, float], api.PodInfo]] = []
    for pod in ctx.states.pods():
        if _evict.never_evicted(pod) or not _evict.policy_allows(pod, gate) or not pod.eviction_enabled:
            continue
        if pod.priority_value > threshold:
            continue
        value = _shared.last_value(ctx, usage_metric, {"pod_uid": pod.uid}, window=window)
        if value is None:
            continue  # Koordinator leaves out pods without a sample
        used[pod.uid] = int(value * 1000) if usage_metric == api.POD_CPU_USAGE else value
        sub = used[pod.uid] if by_request is None else request(pod, by_request)[1]
        keyed.append(((eviction_priority(pod), pod.priority_value, label_priority(pod), -sub), pod))
    keyed.sort(key=lambda kp: kp[0])
    ordered: list[api.PodInfo] = []
    # ties of the Koordinator key go by name, descending, as the BE strategies break them
    for _key, group in _groups(keyed):
        ordered += sorted(group, key=lambda p: p.name, reverse=True)
    return ordered, used


def _groups(
    keyed: Sequence[tuple[tuple[int, int, int, float], api.PodInfo]],
) -> list[tuple[tuple[int, int, int, float], list[api.PodInfo]]]:
    out: list[tuple[tuple[int, int, int, float], list[api.PodInfo]]] = []
    for key, pod in keyed:
        if out and out[-1][0] == key:
            out[-1][1].append(pod)
        else:
            out.append((key, [pod]))
    return out


def allocatable_missing(threshold: int | None, lower: int | None, priority: int | None, what: str) -> str:
    """What an allocatable strategy's settings lack (``what``: ``cpu`` or ``memory``); empty: nothing."""
    if threshold is None or lower is None:
        return f"{what}AllocatableEvictThresholdPercent/LowerPercent not set"
    if priority is None:
        return "allocatableEvictPriorityThreshold not set"
    if lower >= threshold:
        return f"{what}AllocatableEvictLowerPercent ({lower}) not below the threshold ({threshold})"
    return ""


def usage_missing(threshold: int | None, lower: int | None, priority: int | None, what: str) -> str:
    """What a usage strategy's (``CPUEvict``, ``MemoryEvict``) settings lack; empty: nothing."""
    if threshold is None or lower is None:
        return f"{what}EvictThresholdPercent not set"
    if priority is None:
        return "evictEnabledPriorityThreshold not set"
    if lower >= threshold:
        return f"{what}EvictLowerPercent ({lower}) not below the threshold ({threshold})"
    return ""


def allocatable_of(node: api.NodeInfo, resource: str) -> int:
    return {
        api.BATCH_CPU: node.batch_cpu_allocatable_milli,
        api.MID_CPU: node.mid_cpu_allocatable_milli,
        api.BATCH_MEMORY: node.batch_memory_allocatable_bytes,
        api.MID_MEMORY: node.mid_memory_allocatable_bytes,
    }[resource]


def allocatable_release(
    pods: Sequence[api.PodInfo], node: api.NodeInfo, kind: str, threshold: int, lower: int, priority: int
) -> dict[str, float]:
    """Per batch/mid resource of ``kind``, what the allocatable strategy releases (module doc)."""
    requested: dict[str, int] = {}
    for pod in pods:
        if pod.is_active and pod.priority_value <= priority:
            resource, amount = request(pod, kind)
            requested[resource] = requested.get(resource, 0) + amount
    out: dict[str, float] = {}
    for resource in _RESOURCES[kind].values():
        asked, alloc = requested.get(resource, 0), allocatable_of(node, resource)
        if asked <= 0 or alloc == api.UNKNOWN:
            continue
        if alloc == 0:
            out[resource] = float(asked)
        elif asked / alloc > threshold / 100:
            out[resource] = float(int(asked - lower / 100 * alloc))
    return out


def allocatable_releases(kind: str, released: Mapping[str, float]) -> PodRelease:
    """What evicting a pod releases toward an allocatable task: its request, when its class's resource is
    one the task releases (a prod or none pod releases nothing there)."""

    def of(pod: api.PodInfo) -> Mapping[str, float]:
        resource, amount = request(pod, kind)
        return {resource: float(amount)} if resource in released else {}

    return of


def usage_release_milli(used_cores: float, capacity_milli: int, threshold: int, lower: int) -> float:
    """``CPUEvict``'s release: ``usage% = int(used * 1000) * 100 / capacity`` (integers); from the
    threshold on, ``capacity * (usage% - lower) / 100`` millicores (0 below it)."""
    if capacity_milli <= 0:
        return 0.0
    usage_percent = int(used_cores * 1000) * 100 // capacity_milli
    if usage_percent < threshold:
        return 0.0
    return float(capacity_milli * (usage_percent - lower) // 100)


def allocatable_task(
    ctx: api.PluginContext,
    cooling: _evict.Cooling,
    gate: str,
    node: api.NodeInfo,
    settings: tuple[int | None, int | None, int | None],
    kind: str,
    usage_metric: str,
) -> _evict.EvictTask | None:
    """The CPU or memory allocatable task (Koordinator's ``CPUAllocatableEvict``/``MemoryAllocatableEvict``):
    ``settings`` are the NodeSLO's threshold, lower percent and priority threshold for ``kind``; ``None``
    while they are incomplete (said once by ``cooling``) or nothing is over the threshold."""
    threshold, lower, priority = settings
    if not cooling.configured(ctx, gate, allocatable_missing(threshold, lower, priority, kind)):
        return None
    assert threshold is not None and lower is not None and priority is not None
    to_release = allocatable_release(ctx.states.pods(), node, kind, threshold, lower, priority)
    if not to_release:
        return None
    chosen, _usage = victims(ctx, gate, priority, usage_metric, kind)
    return _evict.EvictTask(
        gate, _evict.BY_REQUEST, to_release, chosen, allocatable_releases(kind, to_release)
    )
