"""koordlet's resource-summary metrics, built at each ``/metrics`` render from what the states informer knows.

Layer: ``koordlet.metricsadvisor``. ``koordlet_node_resource_allocatable`` carries the node's batch
allocatable and ``koordlet_container_resource_requests`` / ``_limits`` each running container's batch
requests and limits, as koordlet's ``states_node.go`` / ``states_pods.go`` record them (the extended
resources only: cpu and memory are the kubelet's own metrics). Units are ``integer`` for batch-cpu
(millicores counted as an integer resource) and ``byte`` for batch-memory; koordlet mixes them up for
containers (``integer`` memory requests, ``byte`` cpu limits), which we do not copy.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from koordlet import api, metricdefs
from koordlet.metricsadvisor.exposition import RowFamily
from koordshared.apis.extension.qos import BATCH_CPU, BATCH_MEMORY


def _family(d: metricdefs.MetricDef) -> GaugeMetricFamily:
    return RowFamily(d.name, d.help, labels=list(d.labels))


class ResourceSummaryExporter(Collector):
    """Node batch allocatable and container batch requests/limits, from the states informer."""

    def __init__(self, states: api.StatesReader, node_name: str) -> None:
        self._states = states
        self._node = node_name

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # built per scrape from the informer's snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self._node
        alloc = _family(metricdefs.NODE_RESOURCE_ALLOCATABLE)
        info = self._states.node()
        if info is not None and info.batch_cpu_allocatable_milli >= 0:
            alloc.add_metric([node, BATCH_CPU, metricdefs.UNIT_INTEGER], info.batch_cpu_allocatable_milli)
        if info is not None and info.batch_memory_allocatable_bytes >= 0:
            alloc.add_metric([node, BATCH_MEMORY, metricdefs.UNIT_BYTE], info.batch_memory_allocatable_bytes)
        yield alloc
        requests = _family(metricdefs.CONTAINER_RESOURCE_REQUESTS)
        limits = _family(metricdefs.CONTAINER_RESOURCE_LIMITS)
        for pod in self._states.pods():
            for c in pod.containers:
                if not c.container_id:
                    continue  # koordlet records containers with a status only
                ids = [pod.uid, pod.name, pod.namespace, c.container_id, c.name]
                for fam, cpu, mem in (
                    (requests, c.batch_cpu_request_milli, c.batch_memory_request_bytes),
                    (limits, c.batch_cpu_limit_milli, c.batch_memory_limit_bytes),
                ):
                    if cpu > 0:
                        fam.add_metric([node, BATCH_CPU, metricdefs.UNIT_INTEGER, *ids], cpu)
                    if mem > 0:
                        fam.add_metric([node, BATCH_MEMORY, metricdefs.UNIT_BYTE, *ids], mem)
        yield requests
        yield limits
