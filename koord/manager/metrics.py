"""koord-manager's Prometheus metrics, on an injected registry.

Koordinator's slo-controller counters keep their exact exposition names (``slo_controller_*_count``
with ``status`` and ``reason``, without ``_total``: :class:`~koordshared.kube.gocounter.GoCounter`), so
dashboards carry over. Ours: reconciles by controller and result, queue depth,
and whether this replica leads.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from koordshared.kube.gocounter import GoCounter

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


class ManagerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.slo = {
            controller: GoCounter(name, _HELP[controller], ["status", "reason"], registry)
            for controller, name in SLO_COUNTERS.items()
        }
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
        self.slo[controller].inc(status="succeeded" if succeeded else "failed", reason=reason)

    def bind_queue(self, controller: str, depth: Callable[[], int]) -> None:
        self.queue_depth.labels(controller=controller).set_function(lambda: float(depth()))

    def bind_leader(self, leading: Callable[[], bool]) -> None:
        self.leader.set_function(lambda: 1.0 if leading() else 0.0)
