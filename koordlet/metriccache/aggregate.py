"""Aggregations over the samples of one or more series in a window, koordlet's definitions.

``avg`` is the arithmetic mean; ``pNN`` sorts the values ascending and takes index ``int(n * p) - 1``
clamped at 0 (the lower nearest rank: p50 of [1, 2, 3, 4] is 2); ``last`` is the value with the greatest
timestamp; ``count`` the number of samples; ``duration`` the newest minus the oldest timestamp, which the
NodeMetric report compares with half the window to leave out cold-start aggregates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordlet.metriccache.ring import Window

PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
AGGREGATIONS = ("avg", "last", "count", *PERCENTILES)
DEFAULT_AGGS = ("avg", "p50", "p90", "p95", "p99")


@dataclass(frozen=True, slots=True)
class Aggregates:
    """Several aggregations of the same samples, computed in one pass."""

    values: Mapping[str, float]
    """Aggregation name (``avg``, ``p90``...) to value."""
    count: int
    duration: float
    """Seconds between the oldest and the newest sample."""

    def __getitem__(self, agg: str) -> float:
        return self.values[normalize_agg(agg)]


def normalize_agg(agg: str) -> str:
    """Lower-case name; koordlet spells two of them ``P90``/``P95``. Unknown names raise ``ValueError``."""
    name = agg.lower()
    if name not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {agg!r}; expected one of {list(AGGREGATIONS)}")
    return name


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Koordlet's percentile of ascending ``sorted_values`` (non-empty): index ``int(n*p) - 1``, >= 0."""
    # The float product is deliberate: it is how koordlet computes the index, rounding included.
    idx = int(len(sorted_values) * p) - 1
    return sorted_values[max(idx, 0)]


def aggregate_windows(windows: Iterable[Window], aggs: Sequence[str]) -> Aggregates | None:
    """Merge the windows' samples and compute ``aggs`` (names as :func:`normalize_agg` returns them);
    ``None`` when there is no sample at all."""
    parts = list(windows)
    count = sum(len(w.values) for w in parts)
    if count == 0:
        return None
    t_min = min(w.t_min for w in parts)
    newest = max(parts, key=lambda w: w.t_max)
    values: dict[str, float] = {}
    ordered: list[float] | None = None
    for name in aggs:
        if name == "avg":
            values[name] = math.fsum(itertools.chain.from_iterable(w.values for w in parts)) / count
        elif name == "count":
            values[name] = float(count)
        elif name == "last":
            values[name] = newest.last
        elif name in PERCENTILES:
            if ordered is None:
                ordered = sorted(itertools.chain.from_iterable(w.values for w in parts))
            values[name] = percentile(ordered, PERCENTILES[name])
        else:
            raise ValueError(f"unknown aggregation {name!r}")
    return Aggregates(values=values, count=count, duration=newest.t_max - t_min)
