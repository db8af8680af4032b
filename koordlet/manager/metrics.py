"""koord-manager's Prometheus metrics, on an injected registry.

Koordinator's slo-controller counters keep their exact exposition names (``slo_controller_*_count``
with ``status`` and ``reason``), so dashboards carry over; prometheus_client would append ``_total``
to a ``Counter``, hence the small collector. Ours: reconciles by controller and result, queue depth,
and whether this replica leads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

SLO_COUNTERS = {
    "nodemetric": "slo_controller_nodemetric_reconcile_count",
    "nodeslo": "slo_controller_nodeslo_reconcile_count",
    "noderesource": "slo_controller_node_resource_reconcile_count",
}
_HELP = {
    "nodemetric": "the status count of reconciling NodeMetric",
    "nodeslo": "the status count of reconciling NodeSLO",
    "noderesource": "the status count of reconciling node resource",
}


class _SLOCounters(Collector):
    """Counters exposed under Koordinator's names, without the ``_total`` suffix."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str, str], float] = {}

    def inc(self, controller: str, succeeded: bool, reason: str) -> None:
        key = (controller, "succeeded" if succeeded else "failed", reason)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + 1.0

    def get(self, controller: str, succeeded: bool, reason: str) -> float:
        with self._lock:
            return self._values.get((controller, "succeeded" if succeeded else "failed", reason), 0.0)

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            values = dict(self._values)
        for controller, name in SLO_COUNTERS.items():
            # "unknown" (untyped): a "counter" family would be announced as <name>_total.
            m = Metric(name, _HELP[controller], "unknown")
            for (ctl, status, reason), v in sorted(values.items()):
                if ctl == controller:
                    m.add_sample(name, {"status": status, "reason": reason}, v)
            yield m


class ManagerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.slo = _SLOCounters()
        registry.register(self.slo)
        self.reconciles = Counter(
            "koord_manager_reconciles",
            "Reconciles by controller and result (success, error, not_leader)",
            ["controller", "result"],
            registry=registry,
        )
        self.writes = Counter(
            "koord_manager_api_writes",
            "Writes to the API server by controller, verb and result (ok, conflict, error)",
            ["controller", "verb", "result"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "koord_manager_workqueue_depth",
            "Keys waiting in a controller's queue",
            ["controller"],
            registry=registry,
        )
        self.leader = Gauge("koord_manager_is_leader", "1 while this replica leads", registry=registry)
        self.config_errors = Counter(
            "koord_manager_config_errors",
            "slo-controller-config keys refused (last good kept), by key",
            ["key"],
            registry=registry,
        )

    def record(self, controller: str, succeeded: bool, reason: str) -> None:
        """Koordinator's ``Record*ReconcileCount(succeeded, reason)``."""
        self.slo.inc(controller, succeeded, reason)

    def bind_queue(self, controller: str, depth: Callable[[], int]) -> None:
        self.queue_depth.labels(controller=controller).set_function(lambda: float(depth()))

    def bind_leader(self, leading: Callable[[], bool]) -> None:
        self.leader.set_function(lambda: 1.0 if leading() else 0.0)
