"""The noderesource controller: a node's ``kubernetes.io/batch-cpu`` and ``batch-memory`` (Koordinator's
``BatchResource`` plugin, :mod:`koord.manager.batchresource`) and ``mid-cpu``/``mid-memory`` (its
``MidResource`` plugin, :mod:`koord.manager.midresource`) from its NodeMetric.

Per node: colocation disabled (cluster or node strategy) -> the batch resources are removed; NodeMetric
missing, never reported, older than ``degradeTimeMinutes`` or without node usage (cpu and memory,
Koordinator's ``IsValidNodeUsage``) -> removed (degraded); otherwise computed from the NodeMetric and
the node's pods. Koordinator's batch plugin computes from a report without usage too, taking the
system's usage as nothing (its Mid plugin is the one that checks the usage): a report an agent sent
before its first sample made the node look idle, and lent its reserve to batch pods.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from koord.manager import batchresource as br
from koord.manager import midresource as mr
from koord.manager.configcache import SLOConfigCache
from koord.manager.controller import Writer
from koord.manager.metrics import ManagerMetrics
from koord.manager.nodeowned import annotations_of, labels_of
from koordshared.apis.configuration.slocontroller import ColocationStrategy, node_strategy
from koordshared.apis.core.pod import as_map
from koordshared.apis.meta.quantity import format_bytes, format_decimal
from koordshared.apis.slo.nodemetric import NodeMetricStatus, node_usage_problem, parse_status
from koordshared.kube.informer import Informer

log = logging.getLogger(__name__)

CONTROLLER = "noderesource"
JSON_PATCH = "application/json-patch+json"
Obj = Mapping[str, Any]


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def status_patch(
    node: Obj, want: br.ResourceDecision, mid: br.ResourceDecision | None = None
) -> list[dict[str, Any]]:
    """JSON patch ops setting (or removing) the batch and mid resources in capacity and allocatable."""
    status = as_map(node, "status")
    ops: list[dict[str, Any]] = []
    values = {br.BATCH_CPU: want.cpu, br.BATCH_MEMORY: want.memory}
    if mid is not None:
        values |= {mr.MID_CPU: mid.cpu, mr.MID_MEMORY: mid.memory}
    for section in ("capacity", "allocatable"):
        have = as_map(status, section)
        for name, value in values.items():
            path = f"/status/{section}/{_pointer(name)}"
            if value is None:
                if name in have:
                    ops.append({"op": "remove", "path": path})
            elif br.amount(have, name) != value:
                text = format_decimal(value) if name in (br.BATCH_CPU, mr.MID_CPU) else format_bytes(value)
                ops.append({"op": "add", "path": path, "value": text})
    return ops


class NodeResourceReconciler:
    def __init__(
        self,
        nodes: Informer,
        nodemetrics: Informer,
        pods: Informer,
        cache: SLOConfigCache,
        writer: Writer,
        metrics: ManagerMetrics,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.nodes = nodes
        self.nodemetrics = nodemetrics
        self.pods = pods
        self.cache = cache
        self.writer = writer
        self.metrics = metrics
        self._clock = clock
        self._wall = wall_clock
        self._last_sync: dict[str, float] = {}
        self._status: dict[str, tuple[str, NodeMetricStatus, str]] = {}
        """Per node: the NodeMetric's resourceVersion, its parsed status, why it has no node usage."""

    def forget(self, name: str) -> None:
        """The node or its NodeMetric is gone: the next result is written at once."""
        self._last_sync.pop(name, None)
        self._status.pop(name, None)

    def _metric(self, name: str) -> tuple[NodeMetricStatus, str] | None:
        """The node's NodeMetric status and what its node usage lacks (empty: nothing)."""
        nm = self.nodemetrics.get(name)
        if nm is None:
            self._status.pop(name, None)
            return None
        rv = str(as_map(nm, "metadata").get("resourceVersion") or "")
        cached = self._status.get(name)
        if cached is None or cached[0] != rv:
            raw = nm.get("status")
            cached = self._status[name] = (rv, parse_status(raw), node_usage_problem(raw))
        return cached[1], cached[2]

    def desired(
        self, node: Obj, strategy: ColocationStrategy
    ) -> tuple[br.ResourceDecision, br.ResourceDecision, float | None]:
        """The batch and mid resources for ``node`` and when to look again (the NodeMetric going stale).
        Mid, as Koordinator's plugin, is computed from a report without node usage (nothing counts as
        unused); batch is not."""
        name = str(as_map(node, "metadata").get("name") or "")
        if not self.cache.colocation.cluster.enable or not strategy.enable:
            off = "colocation disabled"
            return br.ResourceDecision(None, None, off, off), br.ResourceDecision(None, None, off, off), None
        got = self._metric(name)
        now = self._wall()
        if got is None or br.is_degraded(got[0], strategy, now):
            off = "degraded"
            return br.ResourceDecision(None, None, off, off), br.ResourceDecision(None, None, off, off), None
        metric, missing = got
        assert metric.update_time is not None
        stale_in = metric.update_time + 60.0 * (strategy.degrade_time_minutes or 0) - now
        pods = self.pods.by_index("node", name)
        view = br.node_view(node)
        mid = mr.calculate(strategy, view, pods, metric, usage_valid=not missing)
        if missing:
            why = f"degraded: {missing}"
            return br.ResourceDecision(None, None, why, why), mid, max(stale_in, 0.0) + 1.0
        return br.calculate(strategy, view, pods, metric), mid, max(stale_in, 0.0) + 1.0

    def __call__(self, name: str) -> float | None:
        node = self.nodes.get(name)
        if node is None:
            self.forget(name)
            self.metrics.record(CONTROLLER, False, "reconcileNodeNotFound")
            return None
        status = as_map(node, "status")
        if not as_map(status, "capacity") or not as_map(status, "allocatable"):
            return None  # Koordinator: no status to sync into yet
        strategy = node_strategy(self.cache.colocation, labels_of(node), annotations_of(node))
        want, mid, recheck = self.desired(node, strategy)
        view = br.node_view(node)
        have_cpu, have_mem = view.batch_capacity
        have_mid_cpu, have_mid_mem = view.mid_capacity
        threshold = strategy.resource_diff_threshold or 0.0
        moved = any(
            br.is_diff(have, new, threshold)
            for have, new in (
                (have_cpu, want.cpu),
                (have_mem, want.memory),
                (have_mid_cpu, mid.cpu),
                (have_mid_mem, mid.memory),
            )
        )
        last = self._last_sync.get(name)
        period = float(strategy.update_time_threshold_seconds or 0)
        expired = last is None or self._clock() - last > period
        ops = status_patch(node, want, mid)
        if ops and (moved or expired):
            try:
                self.writer.send(
                    "patch", "PATCH", f"/api/v1/nodes/{name}/status", ops, content_type=JSON_PATCH
                )
            except Exception:
                self.metrics.record(CONTROLLER, False, "updateNodeStatus")
                raise
            self._last_sync[name] = self._clock()
            self.metrics.record(CONTROLLER, True, "updateNodeStatus")
            log.debug("%s: batch cpu %s, memory %s", name, want.cpu_msg, want.memory_msg)
            log.debug("%s: mid cpu %s, memory %s", name, mid.cpu_msg, mid.memory_msg)
        elif ops:
            # A small change: written once the update period has passed since our last write.
            assert last is not None
            wait = last + period - self._clock() + 0.01
            recheck = wait if recheck is None else min(recheck, wait)
        return recheck
