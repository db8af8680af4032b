"""The extender's Prometheus metrics, on an injected registry (never the global one).

Per verb: request latency and counts by result; per plugin: nodes rejected by its filter, failures by
extension point, time per pass; bindings by result; and, at scrape time, the objects cached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX = "koord_scheduler_extender"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _CacheCollector(Collector):
    def __init__(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        self._sizes = sizes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            f"{PREFIX}_cached_objects", "Objects in the extender's caches", labels=["resource"]
        )
        for resource, n in sorted(self._sizes().items()):
            family.add_metric([resource], n)
        yield family


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.request_duration = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Time to answer one kube-scheduler call, by verb",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.requests = Counter(
            f"{PREFIX}_requests",
            "kube-scheduler calls by verb and result (ok, error, bad_request, not_ready)",
            ["verb", "result"],
            registry=registry,
        )
        self.filter_rejections = Counter(
            f"{PREFIX}_filter_rejections",
            "Nodes a plugin's filter rejected",
            ["plugin"],
            registry=registry,
        )
        self.plugin_errors = Counter(
            f"{PREFIX}_plugin_errors",
            "Calls failed by a plugin, by extension point",
            ["plugin", "extension_point"],
            registry=registry,
        )
        self.plugin_duration = Histogram(
            f"{PREFIX}_plugin_duration_seconds",
            "Time a plugin spent on one call's nodes, by extension point",
            ["plugin", "extension_point"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.bindings = Counter(
            f"{PREFIX}_bindings",
            "Bindings by result (bound, reserve_failed, api_error)",
            ["result"],
            registry=registry,
        )

    def observe_plugin(self, plugin: str, point: str, seconds: float) -> None:
        self.plugin_duration.labels(plugin, point).observe(seconds)

    def watch_caches(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        self.registry.register(_CacheCollector(sizes))
