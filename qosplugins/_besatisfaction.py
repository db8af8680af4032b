"""``BECPUEvict``'s release target: BE CPU satisfaction from the ``node_be`` series (Koordinator's
``pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go``, ``calculateMilliReleaseByBESatisfaction``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordlet import api
from qosplugins import _shared

POLICY_REAL_LIMIT = "evictByRealLimit"
POLICY_ALLOCATABLE = "evictByAllocatable"
DEFAULT_USAGE_THRESHOLD = 90


@dataclass(frozen=True, slots=True)
class BECPU:
    """One reading of the BE CPU figures (millicores)."""

    usage: float
    request: float
    limit: float


def missing(slo: api.ResourceThresholdStrategy) -> str:
    """What the NodeSLO lacks for this strategy (the agent has already refused out-of-range values)."""
    bounds = (slo.cpu_evict_be_satisfaction_lower_percent, slo.cpu_evict_be_satisfaction_upper_percent)
    if None in bounds:
        return "cpuEvictBESatisfactionLowerPercent/UpperPercent not set"
    return ""


def usage_high_enough(be: BECPU, slo: api.ResourceThresholdStrategy) -> bool:
    """Koordinator's ``isBECPUUsageHighEnough``: BE is busy against its limit (unknown limit: no)."""
    if be.limit <= 0:
        return False
    # A sub-core limit cannot show high usage reliably: treat it as busy (Koordinator does the same).
    if be.limit < 1000:
        return True
    threshold = slo.cpu_evict_be_usage_threshold_percent
    threshold = DEFAULT_USAGE_THRESHOLD if threshold is None else threshold
    return be.usage / be.limit >= threshold / 100


def release_milli(be: BECPU, slo: api.ResourceThresholdStrategy) -> int:
    """Batch CPU (millicores, truncated like Koordinator's int64) to release for one reading's request
    and limit; 0 when BE is satisfied. Whether BE is busy is :func:`usage_high_enough`'s question."""
    lower = slo.cpu_evict_be_satisfaction_lower_percent or 0
    upper = slo.cpu_evict_be_satisfaction_upper_percent or 0
    if be.request <= 0:
        return 0
    satisfaction = be.limit / be.request
    if satisfaction > lower / 100:
        return 0
    gap = upper / 100 - satisfaction
    return int(be.request * gap) if gap > 0 else 0


def batch_request_milli(pod: api.PodInfo) -> int:
    """The pod's ``kubernetes.io/batch-cpu`` request: app containers and sidecars (they run alongside)."""
    return sum(max(c.batch_cpu_request_milli, 0) for c in pod.running_containers())


def to_release_milli(ctx: api.PluginContext, slo: api.ResourceThresholdStrategy) -> float:
    """The release target from the averaged and the last BE readings (0 when data is short)."""
    collect = max(ctx.agent.collect_interval, 0.001)
    # Koordinator counts the window in whole seconds (its collect interval is at least 1 s).
    window = max(slo.cpu_evict_time_window_seconds or 0, int(collect))
    span = max(float(window), collect)
    avg = _read(ctx, slo, span, "avg")
    if avg is None:
        return 0.0
    reading, count = avg
    # Too few samples to call it a trend (Koordinator: count * interval >= window / 3, integers).
    if count * collect < window // 3:
        return 0.0
    if not usage_high_enough(reading, slo):
        return 0.0
    by_avg = release_milli(reading, slo)
    if by_avg <= 0:
        return 0.0
    last = _read(ctx, slo, 2 * collect, "last")
    # BE must be starved now too: a high average alone (a burst that has passed) evicts nothing.
    if last is None or not usage_high_enough(last[0], slo):
        return 0.0
    now = last[0]
    if now.request == reading.request and now.limit == reading.limit:
        return float(by_avg)
    by_last = release_milli(now, slo)
    return float(min(by_avg, by_last)) if by_last > 0 else 0.0


def _read(
    ctx: api.PluginContext, slo: api.ResourceThresholdStrategy, window: float, agg: api.Aggregation
) -> tuple[BECPU, int] | None:
    """The BE reading and its sample count (the smallest of the three series'), ``None`` without
    samples. The real limit is read whatever the policy: a missing series is missing data."""
    values: dict[str, float] = {}
    counts: list[int] = []
    for allocation in ("usage", "request", "real-limit"):
        result = ctx.metrics.query(
            api.NODE_BE, window=window, agg=agg, labels=_shared.be_cpu_labels(allocation)
        )
        if result is None or result.count <= 0:
            return None
        values[allocation] = result.value
        counts.append(result.count)
    limit = values["real-limit"]
    if slo.cpu_evict_policy == POLICY_ALLOCATABLE:
        limit = batch_allocatable(ctx.states.node())
    return BECPU(usage=values["usage"], request=values["request"], limit=limit), min(counts)


def batch_allocatable(node: api.NodeInfo | None) -> float:
    """Koordinator's ``getBEMilliAllocatable``: -1 (unknown) when no Node reports
    ``kubernetes.io/batch-cpu``; 1m for a zero allocatable, so satisfaction is still computed."""
    if node is None or node.batch_cpu_allocatable_milli < 0:
        return -1.0
    return float(node.batch_cpu_allocatable_milli or 1)
