"""The metric cache's own health as Prometheus metrics, built at scrape time from one stats snapshot."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from koordlet import metricdefs


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters and sizes of one cache at one moment."""

    series: Mapping[str, int] = field(default_factory=dict)
    """Series count per metric kind."""
    samples: int = 0
    private_series: int = 0
    """Series off their kind's timeline (each holds its own timestamps: twice the bytes a sample)."""
    checkpoint_seconds: float = 0.0
    """Duration of the last successful checkpoint."""
    checkpoint_bytes: int = 0
    """Size of the last checkpoint file written."""
    checkpoints: int = 0
    checkpoint_errors: int = 0
    load_errors: int = 0
    """Checkpoints found corrupt, truncated, of another version, or unreadable at load."""
    trimmed_samples: int = 0
    """Samples left out of checkpoints to respect ``--tsdb-max-bytes``."""


class StatsSource(Protocol):
    def stats(self) -> CacheStats: ...


class MetricCacheCollector:
    """A ``prometheus_client`` collector over :meth:`MetricCache.stats` (``koordlet_metric_cache_*``)."""

    def __init__(self, source: StatsSource) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        st = self._source.stats()
        series = GaugeMetricFamily(
            metricdefs.METRIC_CACHE_SERIES.name, metricdefs.METRIC_CACHE_SERIES.help, labels=["metric"]
        )
        for metric, n in sorted(st.series.items()):
            series.add_metric([metric], n)
        yield series
        yield GaugeMetricFamily(
            metricdefs.METRIC_CACHE_SAMPLES.name, metricdefs.METRIC_CACHE_SAMPLES.help, value=st.samples
        )
        yield GaugeMetricFamily(
            metricdefs.METRIC_CACHE_PRIVATE_SERIES.name,
            metricdefs.METRIC_CACHE_PRIVATE_SERIES.help,
            value=st.private_series,
        )
        yield GaugeMetricFamily(
            metricdefs.METRIC_CACHE_CHECKPOINT_DURATION_SECONDS.name,
            metricdefs.METRIC_CACHE_CHECKPOINT_DURATION_SECONDS.help,
            value=st.checkpoint_seconds,
        )
        yield GaugeMetricFamily(
            metricdefs.METRIC_CACHE_CHECKPOINT_BYTES.name,
            metricdefs.METRIC_CACHE_CHECKPOINT_BYTES.help,
            value=st.checkpoint_bytes,
        )
        yield CounterMetricFamily(
            metricdefs.METRIC_CACHE_CHECKPOINTS.name,
            metricdefs.METRIC_CACHE_CHECKPOINTS.help,
            value=st.checkpoints,
        )
        yield CounterMetricFamily(
            metricdefs.METRIC_CACHE_CHECKPOINT_ERRORS.name,
            metricdefs.METRIC_CACHE_CHECKPOINT_ERRORS.help,
            value=st.checkpoint_errors,
        )
        yield CounterMetricFamily(
            metricdefs.METRIC_CACHE_LOAD_ERRORS.name,
            metricdefs.METRIC_CACHE_LOAD_ERRORS.help,
            value=st.load_errors,
        )
        yield CounterMetricFamily(
            metricdefs.METRIC_CACHE_TRIMMED_SAMPLES.name,
            metricdefs.METRIC_CACHE_TRIMMED_SAMPLES.help,
            value=st.trimmed_samples,
        )
