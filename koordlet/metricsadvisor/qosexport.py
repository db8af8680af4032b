"""Prometheus families of the node QoS II collectors, with koordlet's names, built at scrape time.

Layer: ``koordlet.metricsadvisor``. Like :class:`~koordlet.metricsadvisor.exporter.UsageExporter` it
copies the newest sample of each series out of the metric cache when scraped:

* ``koordlet_container_cpi{node, container_id, container_name, pod_uid, pod_name, pod_namespace,
  cpi_field=cycles|instructions}`` (counts over the last CPI window);
* ``koordlet_resctrl_llc_occupancy{node, cache_id, qos}`` (bytes);
* ``koordlet_resctrl_memory_bandwidth{node, cache_id, qos, mb_type}`` (bytes per second here, where
  koordlet exports the raw MBM counter).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from koordlet import api, metricdefs
from koordlet.api.metrics import CONTAINER_CPI, RESCTRL_LLC, RESCTRL_MB
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw

_CPI_FIELD = {"cycle": "cycles", "instruction": "instructions"}


def _family(d: metricdefs.MetricDef) -> GaugeMetricFamily:
    """A gauge family under koordlet's name, help and label order (:mod:`koordlet.metricdefs`)."""
    return GaugeMetricFamily(d.name, d.help, labels=list(d.labels))


class NodeQoSExporter(Collector):
    """CPI and resctrl monitoring families from the cache's live series."""

    def __init__(
        self, cache: MetricCache, states: api.StatesReader, node_name: str, clock: fw.Clock, *, max_age: float
    ) -> None:
        self._cache = cache
        self._states = states
        self._node = node_name
        self._clock = clock
        self._max_age = max_age

    def _latest(self, metric: str) -> list[tuple[Mapping[str, str], float]]:
        cutoff = self._clock() - self._max_age
        return [(labels, v) for labels, t, v in self._cache.latest(metric) if t >= cutoff]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self._node
        containers = {
            c.container_id: (c, p) for p in self._states.pods() for c in p.containers if c.container_id
        }
        cpi = _family(metricdefs.CONTAINER_CPI)
        for labels, value in self._latest(CONTAINER_CPI):
            hit = containers.get(labels.get("container_id", ""))
            field = _CPI_FIELD.get(labels.get("cpi_resource", ""))
            if hit is None or field is None:
                continue
            c, pod = hit
            cpi.add_metric([node, c.container_id, c.name, pod.uid, pod.name, pod.namespace, field], value)
        yield cpi
        llc = _family(metricdefs.RESCTRL_LLC_OCCUPANCY)
        for labels, value in self._latest(RESCTRL_LLC):
            llc.add_metric([self._node, labels["cache_id"], labels["qos"]], value)
        yield llc
        mb = _family(metricdefs.RESCTRL_MEMORY_BANDWIDTH)
        for labels, value in self._latest(RESCTRL_MB):
            mb.add_metric([self._node, labels["cache_id"], labels["qos"], labels["resctrl_mb_type"]], value)
        yield mb
