"""``BECPUEvict``: evict BE pods whose CPU is too starved to make progress (koordlet.md §6.3).

Every ``cpu-evict-interval-seconds`` (1 s), never within ``cpu-evict-cool-time-seconds`` (20 s) of the last
eviction nor of the start (suppression needs time to settle first). From ``node_be`` (millicores)::

    window        = max(cpuEvictTimeWindowSeconds or collect interval, collect interval)
    usage, request, limit = AVG over window   (limit = real-limit, or batch-cpu allocatable by policy)
    usage high    = limit < 1000m, or usage / limit >= cpuEvictBEUsageThresholdPercent (90)
    satisfaction  = limit / request;  release = request * (upper% - satisfaction) if satisfaction <= lower%

The same on the LAST samples: if last request and limit equal the averages the average's release is
used, else the smaller of both (0 unless both are positive). Victims (BE only) are sorted lower priority
first, then higher ``used / batch-cpu request``; each releases its batch-cpu request.
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


def release_milli(be: BECPU, slo: api.ResourceThresholdStrategy) -> float:
    """Batch CPU (millicores) to release for one reading; 0 when BE is satisfied or not busy."""
    lower = slo.cpu_evict_be_satisfaction_lower_percent or 0
    upper = slo.cpu_evict_be_satisfaction_upper_percent or 0
    threshold = slo.cpu_evict_be_usage_threshold_percent or DEFAULT_USAGE_THRESHOLD
    if be.limit <= 0 or be.request <= 0:
        return 0.0
    # A sub-core limit cannot show high usage reliably: treat it as busy (koordlet does the same).
    if be.limit >= 1000 and be.usage * 100 < be.limit * threshold:
        return 0.0
    satisfaction = be.limit / be.request
    if satisfaction > lower / 100:
        return 0.0
    return max(be.request * (upper / 100 - satisfaction), 0.0)


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
            request = pod.batch_cpu_request_milli
            ratio = cores * 1000 / request if request > 0 else 0.0
            victims.append(_evict.Victim(pod, used=ratio, contribution=float(request)))
        done = _evict.evict_until(ctx, self.name, _evict.sort_victims(victims), to_release, "m")
        if done.evicted:
            self._gate.last_evict = now

    def to_release_milli(self, slo: api.ResourceThresholdStrategy) -> float:
        """The release target from the averaged and the last BE readings (0 when data is short)."""
        collect = max(self.ctx.agent.collect_interval, 0.001)
        window = max(float(slo.cpu_evict_time_window_seconds or collect), collect)
        avg = self._read(slo, window, "avg")
        last = self._read(slo, _shared.WINDOW_LAST_SECONDS, "last")
        if avg is None or last is None:
            return 0.0
        reading, counts = avg
        # Too few samples to call it a trend (koordlet: a third of the window must be covered).
        if min(counts) * collect < window / 3:
            return 0.0
        by_avg = release_milli(reading, slo)
        by_last = release_milli(last[0], slo)
        if last[0].request == reading.request and last[0].limit == reading.limit:
            return by_avg
        return min(by_avg, by_last) if by_avg > 0 and by_last > 0 else 0.0

    def _read(
        self, slo: api.ResourceThresholdStrategy, window: float, agg: api.Aggregation
    ) -> tuple[BECPU, list[int]] | None:
        values: dict[str, float] = {}
        counts: list[int] = []
        allocations = ["usage", "request"]
        if slo.cpu_evict_policy == POLICY_REAL_LIMIT:
            allocations.append("real-limit")
        for allocation in allocations:
            result = self.ctx.metrics.query(
                api.NODE_BE, window=window, agg=agg, labels=_shared.be_cpu_labels(allocation)
            )
            if result is None or result.count <= 0:
                return None
            values[allocation] = result.value
            counts.append(result.count)
        if slo.cpu_evict_policy == POLICY_ALLOCATABLE:
            node = self.ctx.states.node()
            allocatable = node.batch_cpu_allocatable_milli if node is not None else 0
            limit = float(allocatable) if allocatable > 0 else 1.0
        else:
            limit = values["real-limit"]
        return BECPU(usage=values["usage"], request=values["request"], limit=limit), counts
