"""``BECPUEvict``: evict BE pods whose CPU is too starved to make progress (Koordinator's
``pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go``).

Every ``cpu-evict-interval-seconds`` (1 s), never within ``cpu-evict-cool-time-seconds`` (20 s) of the last
eviction nor of the start (suppression needs time to settle first). From ``node_be`` (millicores), as
Koordinator's ``calculateMilliReleaseByBESatisfaction``::

    window        = max(cpuEvictTimeWindowSeconds, whole seconds of the collect interval)
    usage, request, real-limit = AVG over window; too few samples: min(counts) * interval < window // 3
    limit         = real-limit, or by policy evictByAllocatable the node's batch-cpu allocatable
                    (not reported: unknown, nothing evicted; 0: 1m, so a starved BE still counts as busy)
    usage high    = limit > 0 and (limit < 1000m or usage / limit >= cpuEvictBEUsageThresholdPercent (90))
    satisfaction  = limit / request
    release       = int(request * (upper% - satisfaction))  if satisfaction <= lower%

Then the same on the LAST samples (2 collect intervals): BE not busy now means no eviction, whatever the
average says; if last request and limit equal the averages the average's release is used, else the
smaller of both. Victims are pods *labelled* BE, lower ``spec.priority`` first, then higher ``used /
batch-cpu request``; each releases its batch-cpu request, sidecars (restartable init containers)
included.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from koordlet import api
from qosplugins import _evict, _shared

INTERVAL = api.Flag("cpu-evict-interval-seconds", float, 1.0, "BE CPU eviction interval in seconds")
COOL_TIME = api.Flag(
    "cpu-evict-cool-time-seconds", float, 20.0, "seconds without CPU eviction after one (and after start)"
)
POLICY_REAL_LIMIT = "evictByRealLimit"
POLICY_ALLOCATABLE = "evictByAllocatable"
DEFAULT_USAGE_THRESHOLD = 90


@dataclass(frozen=True, slots=True)
class BECPU:
    """One reading of the BE CPU figures (millicores)."""

    usage: float
    request: float
    limit: float


def unconfigured(slo: api.ResourceThresholdStrategy) -> str:
    """Why the strategy cannot run with this NodeSLO (the agent has already refused out-of-range values)."""
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
    return sum(max(c.batch_cpu_request_milli, 0) for c in (*pod.containers, *pod.sidecars))


class BECPUEvict(api.QOSPluginBase):
    """Evict BE pods when their CPU satisfaction stays under the NodeSLO lower bound."""

    name = "BECPUEvict"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(INTERVAL)
        flags.add(COOL_TIME)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        # Koordlet starts the cool-down at start: no CPU eviction before suppression has settled.
        self._gate = _evict.EvictionGate("BECPUEvict", COOL_TIME, ctx.clock(), unconfigured)

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.option(INTERVAL), self.reconcile)

    def reconcile(self) -> None:
        ctx = self.ctx
        now = ctx.clock()
        slo = self._gate.open(ctx)
        if slo is None:
            return
        to_release = self.to_release_milli(slo)
        if to_release <= 0:
            return
        ctx.logger.info("BECPUEvict: BE CPU satisfaction low, releasing %.0fm batch-cpu", to_release)
        victims = []
        for pod in ctx.states.pods():
            if not _evict.evictable(pod, self.name):
                continue
            cores = _shared.last_value(ctx, api.POD_CPU_USAGE, {"pod_uid": pod.uid}) or 0.0
            request = batch_request_milli(pod)
            ratio = int(cores * 1000) / request if request > 0 else 0.0
            victims.append(_evict.Victim(pod, used=ratio, contribution=float(request)))
        done = _evict.evict_until(ctx, self.name, _evict.sort_victims(victims), to_release, "m")
        if done.evicted:
            self._gate.last_evict = now

    def to_release_milli(self, slo: api.ResourceThresholdStrategy) -> float:
        """The release target from the averaged and the last BE readings (0 when data is short)."""
        collect = max(self.ctx.agent.collect_interval, 0.001)
        # Koordinator counts the window in whole seconds (its collect interval is at least 1 s).
        window = max(slo.cpu_evict_time_window_seconds or 0, int(collect))
        span = max(float(window), collect)
        avg = self._read(slo, span, "avg")
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
        last = self._read(slo, 2 * collect, "last")
        # BE must be starved now too: a high average alone (a burst that has passed) evicts nothing.
        if last is None or not usage_high_enough(last[0], slo):
            return 0.0
        now = last[0]
        if now.request == reading.request and now.limit == reading.limit:
            return float(by_avg)
        by_last = release_milli(now, slo)
        return float(min(by_avg, by_last)) if by_last > 0 else 0.0

    def _read(
        self, slo: api.ResourceThresholdStrategy, window: float, agg: api.Aggregation
    ) -> tuple[BECPU, int] | None:
        """The BE reading and its sample count (the smallest of the three series'), ``None`` without
        samples. The real limit is read whatever the policy: a missing series is missing data."""
        values: dict[str, float] = {}
        counts: list[int] = []
        for allocation in ("usage", "request", "real-limit"):
            result = self.ctx.metrics.query(
                api.NODE_BE, window=window, agg=agg, labels=_shared.be_cpu_labels(allocation)
            )
            if result is None or result.count <= 0:
                return None
            values[allocation] = result.value
            counts.append(result.count)
        limit = values["real-limit"]
        if slo.cpu_evict_policy == POLICY_ALLOCATABLE:
            limit = self._batch_allocatable()
        return BECPU(usage=values["usage"], request=values["request"], limit=limit), min(counts)

    def _batch_allocatable(self) -> float:
        """Koordinator's ``getBEMilliAllocatable``: -1 (unknown) when the node does not report
        ``kubernetes.io/batch-cpu``; 1m for a zero allocatable, so satisfaction is still computed."""
        node = self.ctx.states.node()
        if node is None or node.batch_cpu_allocatable_milli < 0:
            return -1.0
        return float(node.batch_cpu_allocatable_milli or 1)
