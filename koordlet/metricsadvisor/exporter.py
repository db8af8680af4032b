"""Prometheus exposition of usage, built from the metric cache when rendered, and the advisor's own health.

Layer: ``koordlet.metricsadvisor``. :class:`UsageExporter` is a ``prometheus_client`` custom collector
whose families are :class:`~koordlet.metricsadvisor.exposition.RowFamily`: a render (after a pod sweep
when a scrape is due, by :class:`~koordlet.metricsadvisor.exposition.Exposition`; scrapes are served its
bytes) copies the newest sample of each kind out of the cache (``MetricCache.latest`` holds the cache
lock only for that copy, one kind at a time) and formats outside any lock. Series of pods that left the
states informer, and samples older than ``max_age``, are not exported, so deleted pods disappear with
the next render.
:class:`AdvisorMetrics` holds collection duration, tick lateness and errors by collector and kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from koordlet import api, metricdefs
from koordlet.api.metrics import CONTAINER_PSI, NODE_PSI, POD_PSI, POD_PSI_CPU_FULL_SUPPORTED
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.beresource import REAL_LIMIT, REQUEST, USAGE
from koordlet.metricsadvisor.exposition import RowFamily

DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

_POD_LABELS = ["node", "pod_uid", "pod_name", "pod_namespace"]
_CONTAINER_LABELS = ["node", "container_id", "container_name", "pod_uid", "pod_name", "pod_namespace"]
_PSI_LABELS = ["psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported"]


class AdvisorMetrics:
    """Collection health on the agent registry; also the collectors' :class:`~framework.ErrorSink`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            metricdefs.COLLECT_DURATION_SECONDS.name,
            metricdefs.COLLECT_DURATION_SECONDS.help,
            ["collector"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.cpu = Counter(
            metricdefs.COLLECT_CPU_SECONDS.name,
            metricdefs.COLLECT_CPU_SECONDS.help,
            ["collector"],
            registry=registry,
        )
        self.lateness = Histogram(
            metricdefs.COLLECT_LATENESS_SECONDS.name,
            metricdefs.COLLECT_LATENESS_SECONDS.help,
            ["collector"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            metricdefs.COLLECT_ERRORS.name,
            metricdefs.COLLECT_ERRORS.help,
            ["collector", "kind"],
            registry=registry,
        )

    def error(self, collector: str, kind: str, n: int = 1) -> None:
        self.errors.labels(collector=collector, kind=kind).inc(n)

    def on_tick(self, collector: str, duration: float, lateness: float) -> None:
        self.duration.labels(collector=collector).observe(duration)
        self.lateness.labels(collector=collector).observe(lateness)

    def on_error(self, collector: str, err: BaseException) -> None:
        self.error(collector, f"exception:{type(err).__name__}")


class UsageExporter(Collector):
    """Koordlet's usage families, from the cache's live series, at render time."""

    def __init__(
        self,
        cache: MetricCache,
        states: api.StatesReader,
        node_name: str,
        clock: fw.Clock,
        *,
        max_age: float = 30.0,
        be_suppress_alias: bool = False,
    ) -> None:
        self._cache = cache
        self._states = states
        self._node = node_name
        self._clock = clock
        self._max_age = max_age
        self._be_suppress_alias = be_suppress_alias
        """Also export ``koordlet_be_suppress_be_used_cpu_cores``; off by default because the
        BECPUSuppress plugin owns that name (its value at suppression time)."""

    def _latest(self, metric: str, now: float) -> list[tuple[Mapping[str, str], float]]:
        cutoff = now - self._max_age
        return [(labels, v) for labels, t, v in self._cache.latest(metric) if t >= cutoff]

    def _one(self, metric: str, now: float) -> float | None:
        got = self._latest(metric, now)
        return got[0][1] if got else None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self._clock()
        node = self._node
        pods = {p.uid: p for p in self._states.pods()}
        containers = {c.container_id: (c, p) for p in pods.values() for c in p.containers if c.container_id}
        yield from self._node_families(now)
        pod_fam = RowFamily(
            metricdefs.POD_RESOURCE_USAGE.name,
            metricdefs.POD_RESOURCE_USAGE.help,
            labels=[*_POD_LABELS, "resource", "unit"],
        )
        cont_fam = RowFamily(
            metricdefs.CONTAINER_RESOURCE_USAGE.name,
            metricdefs.CONTAINER_RESOURCE_USAGE.help,
            labels=[*_CONTAINER_LABELS, "resource", "unit"],
        )
        for metric, resource, unit in (
            (api.POD_CPU_USAGE, "cpu", "core"),
            (api.POD_MEMORY_USAGE, "memory", "byte"),
        ):
            for labels, value in self._latest(metric, now):
                pod = pods.get(labels.get("pod_uid", ""))
                if pod is not None:
                    pod_fam.add_metric([node, pod.uid, pod.name, pod.namespace, resource, unit], value)
        for metric, resource, unit in (
            (api.CONTAINER_CPU_USAGE, "cpu", "core"),
            (api.CONTAINER_MEMORY_USAGE, "memory", "byte"),
        ):
            for labels, value in self._latest(metric, now):
                hit = containers.get(labels.get("container_id", ""))
                if hit is not None:
                    c, pod = hit
                    cont_fam.add_metric(
                        [node, c.container_id, c.name, pod.uid, pod.name, pod.namespace, resource, unit],
                        value,
                    )
        yield pod_fam
        yield cont_fam
        yield from self._psi_families(now, pods, containers)
        yield self._host_app_family(now)

    def _node_families(self, now: float) -> Iterable[GaugeMetricFamily]:
        node = self._node
        usage = RowFamily(
            metricdefs.NODE_RESOURCE_USAGE.name,
            metricdefs.NODE_RESOURCE_USAGE.help,
            labels=["node", "resource", "unit"],
        )
        cpu = self._one(api.NODE_CPU_USAGE, now)
        mem = self._one(api.NODE_MEMORY_USAGE, now)
        used_cpu = RowFamily(metricdefs.NODE_USED_CPU_CORES.name, "Node CPU used (cores)", labels=["node"])
        used_mem = RowFamily(
            metricdefs.NODE_USED_MEMORY_BYTES.name, "Node memory used (bytes)", labels=["node"]
        )
        if cpu is not None:
            usage.add_metric([node, "cpu", "core"], cpu)
            used_cpu.add_metric([node], cpu)
        if mem is not None:
            usage.add_metric([node, "memory", "byte"], mem)
            used_mem.add_metric([node], mem)
        system = RowFamily(
            metricdefs.NODE_SYSTEM_RESOURCE_USAGE.name,
            metricdefs.NODE_SYSTEM_RESOURCE_USAGE.help,
            labels=["node", "resource", "unit"],
        )
        for metric, resource, unit in (
            (api.SYS_CPU_USAGE, "cpu", "core"),
            (api.SYS_MEMORY_USAGE, "memory", "byte"),
        ):
            value = self._one(metric, now)
            if value is not None:
                system.add_metric([node, resource, unit], value)
        be = RowFamily(
            metricdefs.NODE_BE_RESOURCE.name,
            metricdefs.NODE_BE_RESOURCE.help,
            labels=["node", "resource", "allocation", "unit"],
        )
        be_used: float | None = None
        for labels, value in self._latest(api.NODE_BE, now):
            allocation = labels.get("be_allocation", "")
            if allocation in (USAGE, REAL_LIMIT, REQUEST):
                be.add_metric([node, labels.get("be_resource", "cpu"), allocation, "core"], value / 1000.0)
            if allocation == USAGE:
                be_used = value / 1000.0
        yield from (usage, used_cpu, used_mem, system, be)
        if self._be_suppress_alias:
            alias = RowFamily(
                metricdefs.BE_SUPPRESS_BE_USED_CPU_CORES.name, "BE CPU used (cores)", labels=["node"]
            )
            if be_used is not None:
                alias.add_metric([node], be_used)
            yield alias

    def _psi_families(
        self,
        now: float,
        pods: Mapping[str, api.PodInfo],
        containers: Mapping[str, tuple[api.ContainerInfo, api.PodInfo]],
    ) -> Iterable[GaugeMetricFamily]:
        node = self._node
        node_fam = RowFamily(
            metricdefs.NODE_PSI.name, metricdefs.NODE_PSI.help, labels=["node", *_PSI_LABELS[:3]]
        )
        for labels, value in self._latest(NODE_PSI, now):
            node_fam.add_metric(
                [node, labels["psi_resource"], labels["psi_precision"], labels["psi_degree"]], value
            )
        full = {labels["pod_uid"]: v for labels, v in self._latest(POD_PSI_CPU_FULL_SUPPORTED, now)}
        pod_fam = RowFamily(
            metricdefs.POD_PSI.name, "Pod pressure stall", labels=[*_POD_LABELS, *_PSI_LABELS]
        )
        for labels, value in self._latest(POD_PSI, now):
            pod = pods.get(labels.get("pod_uid", ""))
            if pod is None:
                continue
            supported = "true" if full.get(pod.uid, 0.0) > 0 else "false"
            pod_fam.add_metric(
                [
                    node,
                    pod.uid,
                    pod.name,
                    pod.namespace,
                    labels["psi_resource"],
                    labels["psi_precision"],
                    labels["psi_degree"],
                    supported,
                ],
                value,
            )
        cont_fam = RowFamily(
            metricdefs.CONTAINER_PSI.name,
            "Container pressure stall",
            labels=[*_CONTAINER_LABELS, *_PSI_LABELS],
        )
        for labels, value in self._latest(CONTAINER_PSI, now):
            hit = containers.get(labels.get("container_id", ""))
            if hit is None:
                continue
            c, pod = hit
            supported = "true" if full.get(pod.uid, 0.0) > 0 else "false"
            cont_fam.add_metric(
                [
                    node,
                    c.container_id,
                    c.name,
                    pod.uid,
                    pod.name,
                    pod.namespace,
                    labels["psi_resource"],
                    labels["psi_precision"],
                    labels["psi_degree"],
                    supported,
                ],
                value,
            )
        return (node_fam, pod_fam, cont_fam)

    def _host_app_family(self, now: float) -> GaugeMetricFamily:
        apps = {a.name: a for a in self._states.node_slo().host_applications}
        fam = RowFamily(
            metricdefs.HOST_APPLICATION_RESOURCE_USAGE.name,
            "Host application resource usage",
            labels=["node", "host_application_name", "resource", "priority_class", "qos"],
        )
        for metric, resource in ((api.HOST_APP_CPU_USAGE, "cpu"), (api.HOST_APP_MEMORY_USAGE, "memory")):
            for labels, value in self._latest(metric, now):
                app = apps.get(labels.get("host_app_name", ""))
                if app is not None:
                    fam.add_metric([self._node, app.name, resource, str(app.priority), str(app.qos)], value)
        return fam
