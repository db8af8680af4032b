"""``BECPUEvict``, ``CPUAllocatableEvict`` and ``CPUEvict``: Koordinator's CPU evictor
(``pkg/koordlet/qosmanager/plugins/cpuevict/cpu_evict.go``), one plugin behind the three gates.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading

from koordlet import api
from qosplugins import _besatisfaction, _evict, _priorityevict, _shared
from qosplugins._besatisfaction import POLICY_ALLOCATABLE, POLICY_REAL_LIMIT

__all__ = ["COOL_TIME", "GATES", "INTERVAL", "POLICY_ALLOCATABLE", "POLICY_REAL_LIMIT", "BECPUEvict"]

INTERVAL = api.Flag("cpu-evict-interval-seconds", float, 1.0, "BE CPU eviction interval in seconds")
COOL_TIME = api.Flag(
    "cpu-evict-cool-time-seconds", float, 20.0, "seconds without CPU eviction after one (and after start)"
)
BE_GATE, ALLOCATABLE_GATE, USAGE_GATE = "BECPUEvict", "CPUAllocatableEvict", "CPUEvict"
GATES = (BE_GATE, ALLOCATABLE_GATE, USAGE_GATE)
"""Koordinator's task order."""


class BECPUEvict(api.QOSPluginBase):
    """The CPU eviction strategies: BE satisfaction, batch/mid allocatable, node usage."""

    name = BE_GATE
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)
    serves = (ALLOCATABLE_GATE, USAGE_GATE)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(INTERVAL)
        flags.add(COOL_TIME)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        # Koordlet starts the cool-down at start: no CPU eviction before suppression has settled.
        self._cooling = _evict.Cooling(self.name, COOL_TIME, ctx.clock())

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.option(INTERVAL), self.reconcile)

    def reconcile(self) -> None:
        ctx = self.ctx
        now = ctx.clock()
        slo = self._cooling.open(ctx)
        node = ctx.states.node()
        if slo is None or node is None or node.cpu_capacity_milli <= 0:
            return
        tasks = []
        for gate in _evict.gates_on(ctx, self.name, GATES):
            task = self._task(gate, slo, node)
            if task is not None:
                tasks.append(task)
        if tasks and _evict.evict_round(ctx, tasks):
            self._cooling.last_evict = now

    def _task(
        self, gate: str, slo: api.ResourceThresholdStrategy, node: api.NodeInfo
    ) -> _evict.EvictTask | None:
        if gate == BE_GATE:
            return self._be_task(slo)
        if gate == ALLOCATABLE_GATE:
            return self._allocatable_task(slo, node)
        return self._usage_task(slo, node)

    def to_release_milli(self, slo: api.ResourceThresholdStrategy) -> float:
        """``BECPUEvict``'s release target in batch-cpu millicores (0 when BE is satisfied or data short)."""
        return _besatisfaction.to_release_milli(self.ctx, slo)

    def _be_task(self, slo: api.ResourceThresholdStrategy) -> _evict.EvictTask | None:
        ctx = self.ctx
        if not self._cooling.configured(ctx, BE_GATE, _besatisfaction.missing(slo)):
            return None
        to_release = self.to_release_milli(slo)
        if to_release <= 0:
            return None
        ctx.logger.info("BECPUEvict: BE CPU satisfaction low, releasing %.0fm batch-cpu", to_release)
        victims = []
        for pod in ctx.states.pods():
            if not _evict.evictable(pod, BE_GATE):
                continue
            cores = _shared.last_value(ctx, api.POD_CPU_USAGE, {"pod_uid": pod.uid}) or 0.0
            request = _besatisfaction.batch_request_milli(pod)
            victims.append(_evict.Victim(pod, int(cores * 1000) / request if request > 0 else 0.0))
        return _evict.EvictTask(
            BE_GATE,
            _evict.BY_REQUEST,
            {api.BATCH_CPU: to_release},
            _evict.sort_victims(victims),
            lambda pod: {api.BATCH_CPU: float(_besatisfaction.batch_request_milli(pod))},
        )

    def _allocatable_task(
        self, slo: api.ResourceThresholdStrategy, node: api.NodeInfo
    ) -> _evict.EvictTask | None:
        settings = (
            slo.cpu_allocatable_evict_threshold_percent,
            slo.cpu_allocatable_evict_lower_percent,
            slo.allocatable_evict_priority_threshold,
        )
        return _priorityevict.allocatable_task(
            self.ctx, self._cooling, ALLOCATABLE_GATE, node, settings, _priorityevict.CPU, api.POD_CPU_USAGE
        )

    def _usage_task(self, slo: api.ResourceThresholdStrategy, node: api.NodeInfo) -> _evict.EvictTask | None:
        ctx = self.ctx
        threshold, lower, priority = (
            slo.cpu_evict_threshold_percent,
            slo.cpu_evict_lower,
            slo.evict_enabled_priority_threshold,
        )
        missing = _priorityevict.usage_missing(threshold, lower, priority, "cpu")
        if not self._cooling.configured(ctx, USAGE_GATE, missing):
            return None
        assert threshold is not None and lower is not None and priority is not None
        collect = max(ctx.agent.collect_interval, 0.001)
        window = max(float(slo.cpu_evict_time_window_seconds or 0), collect)
        result = ctx.metrics.query(api.NODE_CPU_USAGE, window=window, agg="avg")
        if result is None or result.count <= 0:
            return None
        release = _priorityevict.usage_release_milli(result.value, node.cpu_capacity_milli, threshold, lower)
        if release <= 0:
            return None
        ctx.logger.info(
            "CPUEvict: node CPU %.2f cores of %dm >= %d%%, releasing %.0fm",
            result.value,
            node.cpu_capacity_milli,
            threshold,
            release,
        )
        victims, used = _priorityevict.victims(ctx, USAGE_GATE, priority, api.POD_CPU_USAGE, None)

        def releases(pod: api.PodInfo) -> dict[str, float]:
            if pod.uid not in used:
                used[pod.uid] = int(
                    (_shared.last_value(ctx, api.POD_CPU_USAGE, {"pod_uid": pod.uid}) or 0) * 1000
                )
            return {_priorityevict.CPU: float(used[pod.uid])}

        return _evict.EvictTask(USAGE_GATE, _evict.BY_USAGE, {_priorityevict.CPU: release}, victims, releases)
