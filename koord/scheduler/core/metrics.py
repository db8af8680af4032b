"""koord-scheduler's metrics, with kube-scheduler's names, labels and buckets, so its dashboards and alerts
work unchanged: attempts and their duration by result and profile, pending pods by queue, time per plugin
and per extension point, preemption attempts and victims, the cache's size."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koord.scheduler.framework.runtime import kube_point

# kube-scheduler's buckets (metrics.go): exponential from 1 ms, and from 0.01 ms for plugins.
ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
PLUGIN_BUCKETS = tuple(0.00001 * 1.5**i for i in range(20))
POINT_BUCKETS = tuple(0.0001 * 2**i for i in range(12))


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=registry,
        )
        self.pending = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number "
            "of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            ["queue"],
            registry=registry,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=PLUGIN_BUCKETS,
            registry=registry,
        )
        self.point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=POINT_BUCKETS,
            registry=registry,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=registry,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=tuple(2**i for i in range(7)),
            registry=registry,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=tuple(2**i for i in range(5)),
            registry=registry,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue",
            ["attempts"],
            buckets=tuple(0.01 * 2**i for i in range(20)),
            registry=registry,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=registry,
        )
        self._unschedulable: Callable[[], Mapping[tuple[str, str], int]] = dict
        registry.register(_Unschedulable(self._unschedulable_counts))

        self._plugin_children: dict[tuple[str, str], Any] = {}
        self._point_children: dict[tuple[str, str, str], Any] = {}

    def attempt(self, profile: str, result: str, seconds: float) -> None:
        self.attempts.labels(result=result, profile=profile).inc()
        self.attempt_duration.labels(result=result, profile=profile).observe(seconds)

    def scheduled(self, attempts: int, seconds: float) -> None:
        """A pod bound ``seconds`` after its first attempt (kube-scheduler labels 15 and more ``15+``)."""
        self.sli_duration.labels(attempts=str(attempts) if attempts < 15 else "15+").observe(seconds)

    def plugin(self, plugin: str, point: str, seconds: float) -> None:
        child = self._plugin_children.get((plugin, point))
        if child is None:  # labels() takes a lock and builds a key: once per plugin and point, not per call
            child = self._plugin_children[(plugin, point)] = self.plugin_duration.labels(
                plugin=plugin, extension_point=kube_point(point), status="Success"
            )
        child.observe(seconds)

    def point(self, profile: str, point: str, status: str, seconds: float) -> None:
        key = (profile, point, status)
        child = self._point_children.get(key)
        if child is None:
            child = self._point_children[key] = self.point_duration.labels(
                extension_point=point, status=status, profile=profile
            )
        child.observe(seconds)

    def bind_queue(self, counts: Callable[[], Mapping[str, int]]) -> None:
        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending.labels(queue=queue).set_function(lambda q=queue: float(counts().get(q, 0)))  # type: ignore[misc]

    def bind_unschedulable(self, counts: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        """``(plugin, profile) -> pods`` the queue holds as unschedulable because that plugin rejected
        them, read at each scrape."""
        self._unschedulable = counts

    def _unschedulable_counts(self) -> Mapping[tuple[str, str], int]:
        return self._unschedulable()  # bound late: the queue exists after the metrics

    def bind_cache(self, counts: Callable[[], tuple[int, int, int]]) -> None:
        for i, kind in enumerate(("nodes", "pods", "assumed_pods")):
            self.cache_size.labels(type=kind).set_function(lambda i=i: float(counts()[i]))  # type: ignore[misc]


class _Unschedulable(Collector):
    """``scheduler_unschedulable_pods{plugin, profile}``, computed from the queue when scraped."""

    def __init__(self, counts: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name.",
            labels=["plugin", "profile"],
        )
        for (plugin, profile), n in sorted(self._counts().items()):
            family.add_metric([plugin, profile], n)
        yield family
