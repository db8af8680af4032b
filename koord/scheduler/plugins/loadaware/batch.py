"""LoadAware's filter and score over many nodes as vector operations, with Koordinator's formulas and
the same integer and floating-point steps as the scalar arithmetic (``load_aware.go``): a pass over 5000
nodes is a few dozen numpy operations.

Per node, two sources: :data:`FACTS`, what the Node object says (capacity, thresholds from the args and
the node's annotation), a snapshot column recomputed only when the node changes; and :class:`Loads`, the
assign cache's sums (:mod:`.table`), gathered under the cache's lock for the nodes of one call. Both are
float64 matrices, one row per node, so gathering the rows of a call is one ``np.take``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from koord.scheduler.plugins.loadaware.args import Vec
from koord.scheduler.plugins.loadaware.table import (
    HAS_METRIC,
    HAS_NODE_METRIC,
    PLAIN,
    PROD,
    UPDATE_TIME,
    agg_columns,
)
from koord.scheduler.plugins.loadaware.thresholds import FilterProfile

Limits = tuple[float, float]
"""Per resource, the usage percentage at which a node fails: ``round(x) > t`` is ``x >= t + 0.5``
(exact, unlike adding 0.5 in floating point); ``inf`` where the threshold or the capacity is 0."""

MAX_SCORE = 100

PASS, EXPIRED, CPU_OVER, MEMORY_OVER, AGG_CPU_OVER, AGG_MEMORY_OVER = range(6)
"""Filter answers per node (:func:`filter_codes`); the plugin turns them into statuses."""


def _limits(thresholds: Vec, capacity: Vec) -> Limits | None:
    """``None`` when every threshold is 0 (the filter is off for this profile)."""
    if thresholds == (0, 0):
        return None
    lim = [t + 0.5 if t > 0 and c > 0 else math.inf for t, c in zip(thresholds, capacity, strict=True)]
    return (lim[0], lim[1])


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What LoadAware derives from one Node object (memoized on its NodeInfo)."""

    capacity: Vec
    profile: FilterProfile
    usage_limits: Limits | None
    prod_limits: Limits | None
    agg_limits: Limits | None
    divisor: Vec
    """The capacity with 0 replaced by 1, so a resource without capacity divides safely (its limit is inf)."""

    @classmethod
    def of(cls, capacity: Vec, profile: FilterProfile) -> NodeFacts:
        agg = profile.aggregated
        return cls(
            capacity,
            profile,
            _limits(profile.usage, capacity),
            _limits(profile.prod, capacity),
            _limits(agg.thresholds, capacity) if agg is not None else None,
            (capacity[0] or 1, capacity[1] or 1),
        )


SLOT, KNOWN = 0, 1
CAPACITY, DIVISOR, USAGE = slice(2, 4), slice(4, 6), slice(6, 8)
HAS_USAGE, PROD_LIMITS, HAS_PROD, AGG_LIMITS, AGG_COLUMN = 8, slice(9, 11), 11, slice(12, 14), 14
FACTS = np.dtype((np.float64, (15,)))
"""One node's row (a float64 vector: capacities are integers far below 2**53, so exact): its slot in the
assign cache's table, whether its Node object is known (1.0), its :class:`NodeFacts` (limits 0 and
``HAS_*`` 0.0 where a threshold set is off), and the table's index of its aggregated thresholds' (type,
window), -1 without aggregated thresholds."""

_NO_LIMITS = (0.0, 0.0)


def facts_row(slot: int, nf: NodeFacts | None, agg_column: int) -> tuple[float, ...]:
    """The :data:`FACTS` row of a node (``nf`` None: its Node object is not known)."""
    if nf is None:
        return (slot, 0.0, 0, 0, 1, 1, *_NO_LIMITS, 0.0, *_NO_LIMITS, 0.0, *_NO_LIMITS, -1)
    return (
        slot,
        1.0,
        *nf.capacity,
        *nf.divisor,
        *(nf.usage_limits or _NO_LIMITS),
        float(nf.usage_limits is not None),
        *(nf.prod_limits or _NO_LIMITS),
        float(nf.prod_limits is not None),
        *(nf.agg_limits or _NO_LIMITS),
        agg_column if nf.agg_limits is not None else -1,
    )


def facts_array(rows: list[tuple[float, ...]]) -> np.ndarray:
    """:data:`FACTS` rows computed one by one (nodes that are not snapshot rows)."""
    return np.array(rows, dtype=np.float64).reshape(len(rows), FACTS.shape[0])


class Loads:
    """The assign cache's sums for the nodes of one call (a copy of their table rows, :mod:`.table`)."""

    __slots__ = ("rows",)

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    @property
    def measured(self) -> np.ndarray:
        """A NodeMetric exists and reported ``status.nodeMetric``."""
        out: np.ndarray = (self.rows[:, HAS_METRIC] > 0) & (self.rows[:, HAS_NODE_METRIC] > 0)
        return out

    @property
    def has_metric(self) -> np.ndarray:
        out: np.ndarray = self.rows[:, HAS_METRIC] > 0
        return out

    @property
    def plain(self) -> np.ndarray:
        return self.rows[:, PLAIN]

    @property
    def prod(self) -> np.ndarray:
        return self.rows[:, PROD]

    def expired(self, now: float, expiration: int) -> np.ndarray:
        """``updateTime`` absent, or at least ``expiration`` seconds old (0: never expires)."""
        t = self.rows[:, UPDATE_TIME]
        old: np.ndarray = np.isnan(t)
        if expiration > 0:
            old |= now - t >= expiration
        return old

    def aggregated(self, columns: np.ndarray) -> np.ndarray:
        """Per node, the existing load under the aggregation of ``columns`` (rows with -1: zeros)."""
        n = len(columns)
        if self.rows.shape[1] <= agg_columns(0).start:
            return np.zeros((n, 2), dtype=np.float64)
        first = agg_columns(0).start + 2 * np.maximum(columns, 0).astype(np.int64)
        picked: np.ndarray = self.rows[np.arange(n)[:, None], first[:, None] + np.arange(2)]
        return picked


def filter_codes(
    facts: np.ndarray,
    loads: Loads,
    estimate: Vec,
    prod_pod: bool,
    expired: np.ndarray | None,
) -> np.ndarray:
    """Koordinator's Filter per node: no NodeMetric, an unknown node or thresholds all 0 pass; then an
    expired NodeMetric (``expired``; ``None`` when expiry is not checked) gives :data:`EXPIRED`; a
    NodeMetric that reported nothing passes; else the first resource whose
    ``(existing + estimate) / capacity * 100`` reaches its limit fails the node. The thresholds are the
    prod ones for a prod pod when set, else the aggregated ones when set (against the aggregated load),
    else the usage ones."""
    n = len(facts)
    use_prod: np.ndarray | None = facts[:, HAS_PROD] > 0 if prod_pod else None
    if use_prod is not None and not use_prod.any():
        use_prod = None
    agg_column = facts[:, AGG_COLUMN]
    agg_rows = agg_column >= 0
    if use_prod is not None:
        agg_rows &= ~use_prod
    use_agg = agg_rows if agg_rows.any() else None
    # The common case (usage thresholds only) takes the fewest operations.
    limits = facts[:, USAGE]
    active = facts[:, HAS_USAGE] > 0
    used = loads.plain
    if use_agg is not None:
        limits = np.where(use_agg[:, None], facts[:, AGG_LIMITS], limits)
        active = active | use_agg
        used = np.where(use_agg[:, None], loads.aggregated(agg_column), used)
    if use_prod is not None:
        limits = np.where(use_prod[:, None], facts[:, PROD_LIMITS], limits)
        active = active | use_prod
        used = np.where(use_prod[:, None], loads.prod, used)
    active &= (facts[:, KNOWN] > 0) & loads.has_metric
    codes = np.zeros(n, dtype=np.int64)
    if expired is not None:
        stale = active & expired
        codes[stale] = EXPIRED
        active &= ~stale
    active &= loads.measured
    over = (used + np.asarray(estimate, dtype=np.float64)) / facts[:, DIVISOR] * 100 >= limits
    cpu = active & over[:, 0]
    memory = active & ~over[:, 0] & over[:, 1]
    if use_agg is None:
        codes[cpu] = CPU_OVER
        codes[memory] = MEMORY_OVER
    else:
        codes[cpu] = np.where(use_agg[cpu], AGG_CPU_OVER, CPU_OVER)
        codes[memory] = np.where(use_agg[memory], AGG_MEMORY_OVER, MEMORY_OVER)
    return codes


def scores(
    facts: np.ndarray,
    used: np.ndarray,
    valid: np.ndarray,
    estimate: Vec,
    weights: Vec,
    dominant: int,
) -> np.ndarray:
    """Koordinator's ``loadAwareSchedulingScorer`` per node, in integers: ``leastUsed_r = (cap - used) *
    100 // cap`` (0 when over capacity or without capacity), ``(sum w_r * leastUsed_r + D * min_r
    leastUsed_r) // (sum w_r + D)``; 0 where not ``valid`` (no fresh NodeMetric, nothing reported,
    unknown node)."""
    weight_sum = weights[0] + weights[1] + dominant
    if weight_sum <= 0:
        return np.zeros(len(facts), dtype=np.int64)
    cap = facts[:, CAPACITY].astype(np.int64)
    load = used.astype(np.int64) + np.asarray(estimate, dtype=np.int64)
    fits = (cap > 0) & (load <= cap)
    least = np.where(fits, (cap - load) * MAX_SCORE // np.maximum(cap, 1), 0)
    total = least[:, 0] * weights[0] + least[:, 1] * weights[1]
    if dominant:
        total += least.min(axis=1) * dominant
    out: np.ndarray = np.where(valid, total // weight_sum, 0)
    return out
