"""The informer's own Prometheus metrics, registered on the injected registry (never the global one)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from koordlet import metricdefs
from koordshared.apis.slo.nodemetric import NodeMetricStatus, Usage


class InformerMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.nodeslo_invalid = Counter(
            metricdefs.NODESLO_INVALID_TOTAL.name,
            metricdefs.NODESLO_INVALID_TOTAL.help,
            registry=reg,
        )
        self.pods_refresh = Counter(
            metricdefs.PODS_REFRESH_TOTAL.name, metricdefs.PODS_REFRESH_TOTAL.help, ["result"], registry=reg
        )
        self.nodemetric_report = Counter(
            metricdefs.NODEMETRIC_REPORT_TOTAL.name,
            metricdefs.NODEMETRIC_REPORT_TOTAL.help,
            ["result"],
            registry=reg,
        )
        self.degraded = Gauge(
            metricdefs.STATES_INFORMER_DEGRADED.name,
            metricdefs.STATES_INFORMER_DEGRADED.help,
            registry=reg,
        )
        self.pods = Gauge(
            metricdefs.STATES_INFORMER_PODS.name, metricdefs.STATES_INFORMER_PODS.help, registry=reg
        )

    def bind(self, degraded: Callable[[], bool], pods: Callable[[], int]) -> None:
        self.degraded.set_function(lambda: 1.0 if degraded() else 0.0)
        self.pods.set_function(lambda: float(pods()))


class NodeMetricGauges:
    """koordlet's gauges of each NodeMetric report: the ``koordlet_node_metric_*`` usages (gate
    ``NodeMetricPromMetrics``) and the prod prediction (``koordlet_node_predicted_resource_*``,
    ``koordlet_node_priority_resource_reclaimable`` and its status)."""

    def __init__(self, registry: CollectorRegistry, node: str, usages: bool) -> None:
        self._node = node
        self._usages = usages
        d = metricdefs
        self.node_usage = d.gauge(d.NODE_METRIC_NODE_USAGE, registry)
        self.system_usage = d.gauge(d.NODE_METRIC_SYSTEM_USAGE, registry)
        self.numa_node_usage = d.gauge(d.NODE_METRIC_NUMA_NODE_USAGE, registry)
        self.numa_system_usage = d.gauge(d.NODE_METRIC_NUMA_SYSTEM_USAGE, registry)
        self.reclaimable = d.gauge(d.NODE_PREDICTED_RESOURCE_RECLAIMABLE, registry)
        self.peak = d.gauge(d.NODE_PREDICTED_RESOURCE_PEAK, registry)
        self.priority_reclaimable = d.gauge(d.NODE_PRIORITY_RESOURCE_RECLAIMABLE, registry)
        self.priority_status = d.gauge(d.NODE_RESOURCE_PRIORITY_RECLAIMABLE_STATUS, registry)

    def _set(self, gauge: Gauge, value: Usage, *labels: str) -> None:
        gauge.labels(self._node, *labels, "cpu", metricdefs.UNIT_CORE).set(value.cpu_milli / 1000)
        gauge.labels(self._node, *labels, "memory", metricdefs.UNIT_BYTE).set(value.memory_bytes)

    def predicted(self, kind: str, predictor: str, value: Usage) -> None:
        self._set(self.reclaimable if kind == "reclaimable" else self.peak, value, predictor)

    def reported(self, status: NodeMetricStatus, *, prediction: bool) -> None:
        if prediction:
            prod = status.prod_reclaimable
            self._set(self.priority_reclaimable, prod or Usage(), "koord-prod")
            self.priority_status.labels(self._node, "koord-prod").set(0 if prod is not None else 1)
        if not self._usages:
            return
        for gauge in (self.node_usage, self.system_usage, self.numa_node_usage, self.numa_system_usage):
            gauge.clear()  # the full set of the latest report: gone NUMA nodes leave no stale series
        if status.node_usage is not None:
            self._set(self.node_usage, status.node_usage)
        if status.system_usage is not None:
            self._set(self.system_usage, status.system_usage)
        for numa in status.numa_usages:
            self._set(self.numa_node_usage, numa.node_usage, str(numa.numa_node_id))
            if numa.system_usage is not None:
                self._set(self.numa_system_usage, numa.system_usage, str(numa.numa_node_id))
