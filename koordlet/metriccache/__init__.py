"""Metric cache: typed ring-buffer time series with windowed aggregates, persisted across restarts.

``MetricCache`` is the component (koordlet's ``metriccache.MetricCache``); collectors append, plugins and the
NodeMetric reporter query through :class:`koordlet.api.MetricReader`, the Prometheus exporter calls
:meth:`MetricCache.latest` at scrape time.
"""

from koordlet.api.metrics import PROPERTIES
from koordlet.metriccache.aggregate import Aggregates, percentile
from koordlet.metriccache.cache import MetricCache
from koordlet.metriccache.config import Family, MetricCacheConfig, family_of
from koordlet.metriccache.kind import SeriesKey, series_key
from koordlet.metriccache.selfmetrics import CacheStats

__all__ = [
    "PROPERTIES",
    "Aggregates",
    "CacheStats",
    "Family",
    "MetricCache",
    "MetricCacheConfig",
    "SeriesKey",
    "family_of",
    "percentile",
    "series_key",
]
