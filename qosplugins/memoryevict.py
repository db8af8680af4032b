"""``BEMemoryEvict``, ``MemoryAllocatableEvict`` and ``MemoryEvict``: Koordinator's memory evictor
(``pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go``), one plugin behind the three gates.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import math
import threading

from koordlet import api
from qosplugins import _evict, _priorityevict, _shared

INTERVAL = api.Flag("memory-evict-interval-seconds", float, 1.0, "BE memory eviction interval in seconds")
COOL_TIME = api.Flag(
    "memory-evict-cool-time-seconds", float, 4.0, "seconds without memory eviction after one"
)
BE_GATE, ALLOCATABLE_GATE, USAGE_GATE = "BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict"
GATES = (BE_GATE, ALLOCATABLE_GATE, USAGE_GATE)
"""Koordinator's task order."""


def release_bytes(used: float, capacity: int, slo: api.ResourceThresholdStrategy) -> float:
    """Bytes to free now (0 below the threshold)."""
    if capacity <= 0:
        return 0.0
    usage_percent = int(used) * 100 // capacity
    if usage_percent < slo.memory_evict_threshold_percent:
        return 0.0
    return max(used - capacity * slo.memory_evict_lower / 100.0, 0.0)


class BEMemoryEvict(api.QOSPluginBase):
    """The memory eviction strategies: node usage for BE pods, batch/mid allocatable, node usage by
    priority."""

    name = BE_GATE
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)
    serves = (ALLOCATABLE_GATE, USAGE_GATE)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(INTERVAL)
        flags.add(COOL_TIME)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._cooling = _evict.Cooling(self.name, COOL_TIME, -math.inf)

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.option(INTERVAL), self.reconcile)

    def reconcile(self) -> None:
        ctx = self.ctx
        now = ctx.clock()
        slo = self._cooling.open(ctx)
        node = ctx.states.node()
        if slo is None or node is None or node.memory_capacity_bytes <= 0:
            return
        tasks = []
        for gate in _evict.gates_on(ctx, self.name, GATES):
            if gate == ALLOCATABLE_GATE:
                task = self._allocatable_task(slo, node)
            else:
                task = self._usage_task(gate, slo, node)
            if task is not None:
                tasks.append(task)
        if tasks and _evict.evict_round(ctx, tasks):
            self._cooling.last_evict = now

    def _usage_task(
        self, gate: str, slo: api.ResourceThresholdStrategy, node: api.NodeInfo
    ) -> _evict.EvictTask | None:
        ctx = self.ctx
        priority = slo.evict_enabled_priority_threshold
        if gate == USAGE_GATE:
            missing = _priorityevict.usage_missing(
                slo.memory_evict_threshold_percent, slo.memory_evict_lower, priority, "memory"
            )
            if not self._cooling.configured(ctx, gate, missing):
                return None
        used = _shared.last_value(ctx, api.NODE_MEMORY_USAGE, window=2 * ctx.agent.collect_interval)
        if used is None:
            return None
        to_release = release_bytes(used, node.memory_capacity_bytes, slo)
        if to_release <= 0:
            return None
        ctx.logger.info(
            "%s: node memory %.0f of %d bytes >= %d%%, releasing %.0f bytes",
            gate,
            used,
            node.memory_capacity_bytes,
            slo.memory_evict_threshold_percent,
            to_release,
        )
        if gate == BE_GATE:
            usage: dict[str, float] = {}
            be = []
            for pod in ctx.states.pods():
                if _evict.evictable(pod, gate):
                    usage[pod.uid] = (
                        _shared.last_value(ctx, api.POD_MEMORY_USAGE, {"pod_uid": pod.uid}) or 0.0
                    )
                    be.append(_evict.Victim(pod, usage[pod.uid]))
            victims = _evict.sort_victims(be)
        else:
            assert priority is not None
            victims, usage = _priorityevict.victims(ctx, gate, priority, api.POD_MEMORY_USAGE, None)

        def releases(pod: api.PodInfo) -> dict[str, float]:
            if pod.uid not in usage:
                usage[pod.uid] = _shared.last_value(ctx, api.POD_MEMORY_USAGE, {"pod_uid": pod.uid}) or 0.0
            return {_priorityevict.MEMORY: usage[pod.uid]}

        return _evict.EvictTask(gate, _evict.BY_USAGE, {_priorityevict.MEMORY: to_release}, victims, releases)

    def _allocatable_task(
        self, slo: api.ResourceThresholdStrategy, node: api.NodeInfo
    ) -> _evict.EvictTask | None:
        settings = (
            slo.memory_allocatable_evict_threshold_percent,
            slo.memory_allocatable_evict_lower_percent,
            slo.allocatable_evict_priority_threshold,
        )
        return _priorityevict.allocatable_task(
            self.ctx,
            self._cooling,
            ALLOCATABLE_GATE,
            node,
            settings,
            _priorityevict.MEMORY,
            api.POD_MEMORY_USAGE,
        )
