"""The informer's own Prometheus metrics, registered on the injected registry (never the global one)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge


class InformerMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.nodeslo_invalid = Counter(
            "koordlet_nodeslo_invalid_total",
            "NodeSLO specs refused by validation (last good kept)",
            registry=reg,
        )
        self.pods_refresh = Counter(
            "koordlet_pods_refresh_total", "Pod list refreshes by result", ["result"], registry=reg
        )
        self.nodemetric_report = Counter(
            "koordlet_nodemetric_report_total",
            "NodeMetric status reports by result",
            ["result"],
            registry=reg,
        )
        self.degraded = Gauge(
            "koordlet_states_informer_degraded",
            "1 while the pod list is older than the allowed staleness",
            registry=reg,
        )
        self.pods = Gauge("koordlet_states_informer_pods", "Pods in the informer's snapshot", registry=reg)

    def bind(self, degraded: Callable[[], bool], pods: Callable[[], int]) -> None:
        self.degraded.set_function(lambda: 1.0 if degraded() else 0.0)
        self.pods.set_function(lambda: float(pods()))
