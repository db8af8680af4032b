"""``BEMemoryEvict``: evict BE pods when node memory crosses the NodeSLO threshold (Koordinator's
``pkg/koordlet/qosmanager/plugins/memoryevict/memory_evict.go``).

Every ``memory-evict-interval-seconds`` (1 s), unless an eviction happened within
``memory-evict-cool-time-seconds`` (4 s)::

    usage% = int(used * 100 / capacity)                    # node memory, last sample
    if usage% >= memoryEvictThresholdPercent:
        release = used - capacity * lower / 100            # lower = memoryEvictLowerPercent or threshold - 2

Koordlet computes ``capacity * (usage% - lower%) / 100`` from the truncated percentage, which can stop
up to 1 % of memory above the lower bound; we release down to the bound itself. Victims are BE pods only
(see ``_evict``), each counted with its last ``pod_memory_usage``.
"""

from __future__ import annotations

import math
import threading

from koordlet import api
from qosplugins import _evict, _shared

INTERVAL = api.Flag("memory-evict-interval-seconds", float, 1.0, "BE memory eviction interval in seconds")
COOL_TIME = api.Flag(
    "memory-evict-cool-time-seconds", float, 4.0, "seconds without memory eviction after one"
)


def release_bytes(used: float, capacity: int, slo: api.ResourceThresholdStrategy) -> float:
    """Bytes to free now (0 below the threshold)."""
    if capacity <= 0:
        return 0.0
    usage_percent = int(used) * 100 // capacity
    if usage_percent < slo.memory_evict_threshold_percent:
        return 0.0
    return max(used - capacity * slo.memory_evict_lower / 100.0, 0.0)


class BEMemoryEvict(api.QOSPluginBase):
    """Release node memory by evicting BE pods, largest first."""

    name = "BEMemoryEvict"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(INTERVAL)
        flags.add(COOL_TIME)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._gate = _evict.EvictionGate("BEMemoryEvict", COOL_TIME, -math.inf)

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.option(INTERVAL), self.reconcile)

    def reconcile(self) -> None:
        ctx = self.ctx
        now = ctx.clock()
        slo = self._gate.open(ctx)
        if slo is None:
            return
        node = ctx.states.node()
        used = _shared.last_value(ctx, api.NODE_MEMORY_USAGE)
        if node is None or used is None:
            return
        to_release = release_bytes(used, node.memory_capacity_bytes, slo)
        if to_release <= 0:
            return
        ctx.logger.info(
            "BEMemoryEvict: node memory %.0f of %d bytes >= %d%%, releasing %.0f bytes",
            used,
            node.memory_capacity_bytes,
            slo.memory_evict_threshold_percent,
            to_release,
        )
        victims = []
        for pod in ctx.states.pods():
            if not _evict.evictable(pod, self.name):
                continue
            mem = _shared.last_value(ctx, api.POD_MEMORY_USAGE, {"pod_uid": pod.uid}) or 0.0
            victims.append(_evict.Victim(pod, used=mem, contribution=mem))
        done = _evict.evict_until(ctx, self.name, _evict.sort_victims(victims), to_release, "B")
        if done.evicted:
            self._gate.last_evict = now
