"""The NodeMetric ``status`` built from the metric cache, per ``spec.metricCollectPolicy`` (koordlet's
``states_nodemetric.go``), and the atomic file the standalone agent writes it to.

Usage is the average over ``aggregateDurationSeconds`` (at least 60 s); the aggregated usages cover each
policy duration with avg/p50/p90/p95/p99 and are left out while the samples span less than half of it
(cold start), so a fresh agent never reports a 30-minute p99 from 20 seconds of data. CPU is printed in
millicores (``"1500m"``), memory in bytes with the largest exact binary suffix, as Kubernetes prints them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metriccache.schema import (
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE,
    NODE_MEMORY_WITH_HOT_PAGE_USAGE,
    NODE_NUMA_CPU_USAGE,
    NODE_NUMA_MEMORY_USAGE,
    POD_MEMORY_USAGE_WITH_PAGE_CACHE,
    SYS_NUMA_CPU_USAGE,
    SYS_NUMA_MEMORY_USAGE,
)
from koordlet.schema.nodemetric import (
    AGGREGATIONS,
    USAGE_WITH_HOT_PAGE_CACHE,
    USAGE_WITH_PAGE_CACHE,
    CollectPolicy,
)
from koordlet.schema.quantity import format_bytes, format_duration, format_milli
from koordlet.schema.timefmt import format_time as rfc3339
from koordlet.system import atomicfile

MIN_AGGREGATE_SECONDS = 60
_POD_HOT_PAGE = "pod_memory_with_hot_page_usage"


class StatusBuilder:
    """Builds the status dict from a :class:`MetricCache` (whose clock defines "now")."""

    def __init__(self, cache: MetricCache, wall_clock: Callable[[], float]) -> None:
        self.cache = cache
        self.wall_clock = wall_clock

    def _avg(self, metric: str, window: float, labels: Mapping[str, str] | None = None) -> float | None:
        res = self.cache.aggregate(metric, window=window, aggs=("avg",), labels=labels)
        return None if res is None else res.values["avg"]

    @staticmethod
    def _resources(cpu: float | None, memory: float | None) -> dict[str, Any]:
        out: dict[str, str] = {}
        if cpu is not None:
            out["cpu"] = format_milli(int(cpu * 1000))
        if memory is not None:
            out["memory"] = format_bytes(int(memory))
        return {"resources": out} if out else {}

    def _node_memory_metric(self, policy: CollectPolicy, window: float) -> str:
        if policy.memory_policy == USAGE_WITH_PAGE_CACHE:
            return NODE_MEMORY_USAGE_WITH_PAGE_CACHE
        if (
            policy.memory_policy == USAGE_WITH_HOT_PAGE_CACHE
            and self._avg(NODE_MEMORY_WITH_HOT_PAGE_USAGE, window) is not None
        ):
            # Hot-page usage exists only while kidled runs; without it koordlet reports plain usage.
            return NODE_MEMORY_WITH_HOT_PAGE_USAGE
        return api.NODE_MEMORY_USAGE

    def _pod_memory_metric(self, policy: CollectPolicy) -> str:
        if policy.memory_policy == USAGE_WITH_PAGE_CACHE:
            return POD_MEMORY_USAGE_WITH_PAGE_CACHE
        if policy.memory_policy == USAGE_WITH_HOT_PAGE_CACHE:
            return _POD_HOT_PAGE
        return api.POD_MEMORY_USAGE

    def _aggregated(
        self, cpu_metric: str, mem_metric: str, durations: Sequence[float]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for d in durations:
            parts: dict[str, dict[str, str]] = {}
            for resource, metric in (("cpu", cpu_metric), ("memory", mem_metric)):
                agg = self.cache.aggregate(metric, window=d, aggs=AGGREGATIONS)
                if agg is None or agg.duration < d / 2:
                    continue  # cold start: the samples do not cover half the window yet
                for name in AGGREGATIONS:
                    value = agg.values[name]
                    text = format_milli(int(value * 1000)) if resource == "cpu" else format_bytes(int(value))
                    parts.setdefault(name, {})[resource] = text
            out.append(
                {"duration": format_duration(d), "usage": {k: {"resources": v} for k, v in parts.items()}}
            )
        return out

    def _numa(self, window: float) -> list[dict[str, Any]]:
        ids: set[int] = set()
        for metric in (NODE_NUMA_CPU_USAGE, NODE_NUMA_MEMORY_USAGE):
            for labels in self.cache.series(metric):
                raw = labels.get("numa_node_id", "")
                if raw.isdecimal():
                    ids.add(int(raw))
        out: list[dict[str, Any]] = []
        for numa in sorted(ids):
            labels = {"numa_node_id": str(numa)}
            node = self._resources(
                self._avg(NODE_NUMA_CPU_USAGE, window, labels),
                self._avg(NODE_NUMA_MEMORY_USAGE, window, labels),
            )
            if not node:
                continue  # koordlet skips a NUMA node without samples in the window
            entry: dict[str, Any] = {"numaNodeID": numa, "nodeUsage": node}
            system = self._resources(
                self._avg(SYS_NUMA_CPU_USAGE, window, labels),
                self._avg(SYS_NUMA_MEMORY_USAGE, window, labels),
            )
            if system:
                entry["systemUsage"] = system
            out.append(entry)
        return out

    def build(
        self,
        policy: CollectPolicy,
        pods: Sequence[api.PodInfo],
        host_apps: Sequence[api.HostApplication] = (),
    ) -> dict[str, Any]:
        window = float(max(policy.aggregate_duration_seconds, MIN_AGGREGATE_SECONDS))
        mem_metric = self._node_memory_metric(policy, window)
        node_metric = {
            "nodeUsage": self._resources(
                self._avg(api.NODE_CPU_USAGE, window), self._avg(mem_metric, window)
            ),
            "aggregatedNodeUsages": self._aggregated(api.NODE_CPU_USAGE, mem_metric, policy.durations),
            "systemUsage": self._resources(
                self._avg(api.SYS_CPU_USAGE, window), self._avg(api.SYS_MEMORY_USAGE, window)
            ),
            "aggregatedSystemUsages": self._aggregated(
                api.SYS_CPU_USAGE, api.SYS_MEMORY_USAGE, policy.durations
            ),
            "numaUsages": self._numa(window),
        }
        pod_mem = self._pod_memory_metric(policy)
        pods_metric: list[dict[str, Any]] = []
        for pod in pods:
            labels = {"pod_uid": pod.uid}
            usage = self._resources(
                self._avg(api.POD_CPU_USAGE, window, labels), self._avg(pod_mem, window, labels)
            )
            if not usage:
                continue  # koordlet leaves out pods without samples in the window
            pods_metric.append(
                {
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "priority": pod.priority_class.value,
                    "qos": pod.qos.value,
                    "podUsage": usage,
                }
            )
        pods_metric.sort(key=lambda p: (p["namespace"], p["name"]))
        apps: list[dict[str, Any]] = []
        for app in sorted(host_apps, key=lambda a: a.name):
            labels = {"host_app_name": app.name}
            usage = self._resources(
                self._avg(api.HOST_APP_CPU_USAGE, window, labels),
                self._avg(api.HOST_APP_MEMORY_USAGE, window, labels),
            )
            if usage:
                apps.append(
                    {"name": app.name, "priority": app.priority.value, "qos": app.qos.value, "usage": usage}
                )
        return {
            "updateTime": rfc3339(self.wall_clock()),
            "nodeMetric": node_metric,
            "podsMetric": pods_metric,
            "hostApplicationMetric": apps,
        }


def write_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` as JSON to ``path`` so readers see the old or the new file, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomicfile.write_atomic(path, [json.dumps(doc, indent=1, sort_keys=True).encode()])
