"""koord-descheduler's Prometheus metrics, on an injected registry.

``descheduler_pods_evicted{result, strategy, namespace, node}`` keeps Koordinator's exact name (no
``_total``); ``result`` is ``success``, ``dry-run``, or why the eviction did not happen (``pdb``,
``max-migrating-per-node``, ``error``...). Ours: rounds by result (``ok``, ``errors``, ``skipped``:
not enough Ready nodes, ``not-leader``), round and plugin durations, plugin failures, cached objects,
and whether this replica leads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from koordshared.kube.gocounter import GoCounter

ROUND_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class DeschedulerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.pods_evicted = GoCounter(
            "descheduler_pods_evicted",
            "Number of evicted pods, by the result, by the strategy, by the namespace, by the node name. "
            "A result other than success or dry-run says why the pod was not evicted",
            ["result", "strategy", "namespace", "node"],
            registry,
        )
        self.rounds = Counter(
            "koord_descheduler_rounds", "Descheduling rounds by result", ["result"], registry=registry
        )
        self.round_duration = Histogram(
            "koord_descheduler_round_duration_seconds",
            "Duration of a descheduling round (evictions included)",
            buckets=ROUND_BUCKETS,
            registry=registry,
        )
        self.plugin_duration = Histogram(
            "koord_descheduler_plugin_duration_seconds",
            "Duration of one plugin's deschedule or balance call",
            ["profile", "plugin", "extension_point"],
            buckets=ROUND_BUCKETS,
            registry=registry,
        )
        self.plugin_errors = Counter(
            "koord_descheduler_plugin_errors",
            "Deschedule or balance calls that failed",
            ["profile", "plugin", "extension_point"],
            registry=registry,
        )
        self.leader = Gauge("koord_descheduler_is_leader", "1 while this replica leads", registry=registry)
        self.cached = Gauge(
            "koord_descheduler_cached_objects",
            "Objects in the shared caches",
            ["resource"],
            registry=registry,
        )

    # ---- the framework's EvictionCounter -----------------------------------------------------------------

    def evicted(self, result: str, plugin: str, namespace: str, node: str) -> None:
        self.pods_evicted.inc(result=result, strategy=plugin, namespace=namespace, node=node)

    def plugin_call(self, profile: str, plugin: str, point: str, seconds: float, failed: bool) -> None:
        self.plugin_duration.labels(profile=profile, plugin=plugin, extension_point=point).observe(seconds)
        if failed:
            self.plugin_errors.labels(profile=profile, plugin=plugin, extension_point=point).inc()

    def bind_leader(self, leading: Callable[[], bool]) -> None:
        self.leader.set_function(lambda: 1.0 if leading() else 0.0)

    def bind_caches(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        for resource in ("nodes", "pods", "nodemetrics"):
            self.cached.labels(resource=resource).set_function(lambda r=resource: float(sizes().get(r, 0)))  # type: ignore[misc]
