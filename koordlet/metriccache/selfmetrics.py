"""The metric cache's own health as Prometheus metrics, built at scrape time from one stats snapshot."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric


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
            "koordlet_metric_cache_series", "Time series held by the metric cache.", labels=["metric"]
        )
        for metric, n in sorted(st.series.items()):
            series.add_metric([metric], n)
        yield series
        yield GaugeMetricFamily(
            "koordlet_metric_cache_samples", "Samples held by the metric cache.", value=st.samples
        )
        yield GaugeMetricFamily(
            "koordlet_metric_cache_private_series",
            "Series of the metric cache off their kind's shared timeline.",
            value=st.private_series,
        )
        yield GaugeMetricFamily(
            "koordlet_metric_cache_checkpoint_duration_seconds",
            "Duration of the last metric cache checkpoint.",
            value=st.checkpoint_seconds,
        )
        yield GaugeMetricFamily(
            "koordlet_metric_cache_checkpoint_bytes",
            "Size of the last metric cache checkpoint file.",
            value=st.checkpoint_bytes,
        )
        yield CounterMetricFamily(
            "koordlet_metric_cache_checkpoints", "Checkpoints written.", value=st.checkpoints
        )
        yield CounterMetricFamily(
            "koordlet_metric_cache_checkpoint_errors", "Checkpoints that failed.", value=st.checkpoint_errors
        )
        yield CounterMetricFamily(
            "koordlet_metric_cache_load_errors",
            "Checkpoints that could not be loaded (corrupt, truncated, other version).",
            value=st.load_errors,
        )
        yield CounterMetricFamily(
            "koordlet_metric_cache_trimmed_samples",
            "Samples left out of checkpoints to stay under --tsdb-max-bytes.",
            value=st.trimmed_samples,
        )
