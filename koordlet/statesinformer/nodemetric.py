"""The NodeMetric ``status`` built from the metric cache, per ``spec.metricCollectPolicy`` (koordlet's
``states_nodemetric.go``), and the atomic file the standalone agent writes it to.

Usage is the average over ``aggregateDurationSeconds`` (at least 60 s); the aggregated usages cover each
policy duration with avg/p50/p90/p95/p99, each reported empty while the samples span less than half of it
(cold start), so a fresh agent never reports a 30-minute p99 from 20 seconds of data. The status is
typed (:class:`koordshared.apis.slo.nodemetric.NodeMetricStatus`, the schema the cluster side reads) and
written in koordlet's JSON shape; ``prodReclaimableMetric``/``prodPeakMetric`` come from the peak
prediction (:mod:`koordlet.prediction`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from koordlet import api
from koordlet.api.metrics import (
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE,
    NODE_MEMORY_WITH_HOT_PAGE_USAGE,
    NODE_NUMA_CPU_USAGE,
    NODE_NUMA_MEMORY_USAGE,
    POD_MEMORY_USAGE_WITH_PAGE_CACHE,
    POD_MEMORY_WITH_HOT_PAGE_USAGE,
    SYS_NUMA_CPU_USAGE,
    SYS_NUMA_MEMORY_USAGE,
)
from koordlet.metriccache import MetricCache
from koordlet.prediction.predictor import PredictionUnavailable, ProdReclaimablePredictor
from koordlet.prediction.server import PeakPredictServer
from koordlet.statesinformer.metrics import NodeMetricGauges
from koordlet.system import atomicfile
from koordshared.apis.slo.nodemetric import (
    AGGREGATIONS,
    USAGE_WITH_HOT_PAGE_CACHE,
    USAGE_WITH_PAGE_CACHE,
    AggregatedUsage,
    CollectPolicy,
    HostAppMetric,
    NodeMetricStatus,
    NUMAUsage,
    PodMetric,
    Usage,
    to_status,
)

log = logging.getLogger(__name__)

MIN_AGGREGATE_SECONDS = 60


class StatusBuilder:
    """Builds the typed status from a :class:`MetricCache` (whose clock defines "now").

    ``use_prediction`` adds ``prodReclaimableMetric``/``prodPeakMetric`` from the peak predict server;
    ``gauges`` records what the report says as koordlet's Prometheus gauges."""

    def __init__(
        self,
        cache: MetricCache,
        wall_clock: Callable[[], float],
        gauges: NodeMetricGauges | None = None,
    ) -> None:
        self.cache = cache
        self.wall_clock = wall_clock
        self.gauges = gauges
        self._prediction: PeakPredictServer | None = None
        self._node: Callable[[], api.NodeInfo | None] = lambda: None

    def use_prediction(self, server: PeakPredictServer, node: Callable[[], api.NodeInfo | None]) -> None:
        self._prediction = server
        self._node = node

    def _avg(self, metric: str, window: float, labels: Mapping[str, str] | None = None) -> float | None:
        res = self.cache.aggregate(metric, window=window, aggs=("avg",), labels=labels)
        return None if res is None else res.values["avg"]

    def _usage(
        self, cpu_metric: str, mem_metric: str, window: float, labels: Mapping[str, str] | None = None
    ) -> Usage | None:
        """Both averages, or nothing (koordlet's query fails as a whole when one metric has no data)."""
        cpu, mem = self._avg(cpu_metric, window, labels), self._avg(mem_metric, window, labels)
        if cpu is None or mem is None:
            return None
        return Usage(int(cpu * 1000), int(mem))

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
            return POD_MEMORY_WITH_HOT_PAGE_USAGE
        return api.POD_MEMORY_USAGE

    def _aggregated(
        self, cpu_metric: str, mem_metric: str, durations: Sequence[float]
    ) -> tuple[AggregatedUsage, ...]:
        out: list[AggregatedUsage] = []
        for d in durations:
            usage: dict[str, Usage] = {}
            cpu = self.cache.aggregate(cpu_metric, window=d, aggs=AGGREGATIONS)
            mem = self.cache.aggregate(mem_metric, window=d, aggs=AGGREGATIONS)
            # Cold start (koordlet's check on the CPU samples): under half the window, every
            # aggregation of this duration is reported empty.
            if cpu is not None and mem is not None and cpu.duration >= d / 2:
                usage = {n: Usage(int(cpu.values[n] * 1000), int(mem.values[n])) for n in AGGREGATIONS}
            out.append(AggregatedUsage(d, usage))
        return tuple(out)

    def _numa(self, window: float) -> tuple[NUMAUsage, ...]:
        ids: set[int] = set()
        for metric in (NODE_NUMA_CPU_USAGE, NODE_NUMA_MEMORY_USAGE):
            for labels in self.cache.series(metric):
                raw = labels.get("numa_node_id", "")
                if raw.isdecimal():
                    ids.add(int(raw))
        out: list[NUMAUsage] = []
        for numa in sorted(ids):
            labels = {"numa_node_id": str(numa)}
            node = self._usage(NODE_NUMA_CPU_USAGE, NODE_NUMA_MEMORY_USAGE, window, labels)
            if node is None:
                continue  # koordlet skips a NUMA node without samples in the window
            system = self._usage(SYS_NUMA_CPU_USAGE, SYS_NUMA_MEMORY_USAGE, window, labels)
            out.append(NUMAUsage(numa, node, system))
        return tuple(out)

    def status(
        self,
        policy: CollectPolicy,
        pods: Sequence[api.PodInfo],
        host_apps: Sequence[api.HostApplication] = (),
    ) -> NodeMetricStatus:
        window = float(max(policy.aggregate_duration_seconds, MIN_AGGREGATE_SECONDS))
        mem_metric = self._node_memory_metric(policy, window)
        now = self.wall_clock()
        predictor = None
        if self._prediction is not None:
            record = self.gauges.predicted if self.gauges is not None else _ignore
            predictor = ProdReclaimablePredictor(self._prediction, self._node(), now, record)
        pod_mem = self._pod_memory_metric(policy)
        pods_metric: list[PodMetric] = []
        for pod in pods:
            usage = self._usage(api.POD_CPU_USAGE, pod_mem, window, {"pod_uid": pod.uid})
            if usage is None:
                continue  # koordlet leaves out pods without samples in the window
            if predictor is not None:
                predictor.add_pod(pod)  # pods with valid metrics only, as koordlet
            pods_metric.append(
                PodMetric(pod.namespace, pod.name, pod.priority_class.value, pod.qos.value, usage)
            )
        pods_metric.sort(key=lambda p: (p.namespace, p.name))
        apps: list[HostAppMetric] = []
        for app in sorted(host_apps, key=lambda a: a.name):
            usage = self._usage(
                api.HOST_APP_CPU_USAGE, api.HOST_APP_MEMORY_USAGE, window, {"host_app_name": app.name}
            )
            if usage is not None:
                apps.append(HostAppMetric(app.name, app.priority.value, app.qos.value, usage))
        reclaimable = peak = None
        if predictor is not None:
            try:
                reclaimable = predictor.result()
                peak = predictor.peak()
            except PredictionUnavailable as err:
                log.debug("nodemetric: no prod prediction yet: %s", err)
        status = NodeMetricStatus(
            update_time=now,
            node_usage=self._usage(api.NODE_CPU_USAGE, mem_metric, window),
            aggregated_node_usages=self._aggregated(api.NODE_CPU_USAGE, mem_metric, policy.durations),
            system_usage=self._usage(api.SYS_CPU_USAGE, api.SYS_MEMORY_USAGE, window),
            aggregated_system_usages=self._aggregated(
                api.SYS_CPU_USAGE, api.SYS_MEMORY_USAGE, policy.durations
            ),
            numa_usages=self._numa(window),
            pods_metric=tuple(pods_metric),
            host_application_metric=tuple(apps),
            prod_reclaimable=reclaimable,
            prod_peak=peak,
        )
        if self.gauges is not None:
            self.gauges.reported(status, prediction=predictor is not None)
        return status

    def build(
        self,
        policy: CollectPolicy,
        pods: Sequence[api.PodInfo],
        host_apps: Sequence[api.HostApplication] = (),
    ) -> dict[str, Any]:
        """The status as koordlet writes it (:func:`koordshared.apis.slo.nodemetric.to_status`)."""
        return to_status(self.status(policy, pods, host_apps))


def _ignore(_kind: str, _predictor: str, _value: Usage) -> None:
    return None


def write_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` as JSON to ``path`` so readers see the old or the new file, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomicfile.write_atomic(path, [json.dumps(doc, indent=1, sort_keys=True).encode()])
