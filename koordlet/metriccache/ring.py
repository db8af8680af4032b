"""One time series as a fixed-capacity circular buffer of timestamps and values in ``array('d')``.

Each sample costs 16 bytes (two C doubles) instead of two boxed floats in a list: 1000 containers x 2 metrics
x 1800 s is ~58 MB as lists and ~29 MB here. The arrays grow by ``append`` (amortised O(1), CPython
over-allocates ~6 %) until they reach the capacity, then the ring overwrites the oldest slot in place.

Samples are kept in append order. As long as timestamps never go backwards (the normal case: one collector
thread stamping with a monotonic clock) the series is ``in_order`` and windows are found by binary search;
an out-of-order append is accepted and only switches that series to a linear scan.
Not thread-safe on its own: the cache serialises access.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Window:
    """The samples of one series inside a window, copied out so they can be aggregated without a lock."""

    values: array[float]
    t_min: float
    t_max: float
    last: float
    """Value at the greatest timestamp (the later append wins a tie)."""


class Ring:
    """A circular buffer of ``(t, value)`` samples, oldest overwritten once ``capacity`` is reached."""

    __slots__ = ("capacity", "head", "in_order", "t_last", "ts", "vs")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"ring capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.ts: array[float] = array("d")
        self.vs: array[float] = array("d")
        self.head = 0
        """Physical index of the oldest sample once the ring is full (0 before)."""
        self.in_order = True
        self.t_last = float("-inf")
        """Greatest timestamp ever appended (not forgotten when overwritten: only used for ordering)."""

    def __len__(self) -> int:
        return len(self.ts)

    def append(self, t: float, v: float) -> None:
        ts = self.ts
        if len(ts) < self.capacity:
            ts.append(t)
            self.vs.append(v)
        else:
            h = self.head
            ts[h] = t
            self.vs[h] = v
            h += 1
            self.head = 0 if h == self.capacity else h
        if t >= self.t_last:
            self.t_last = t
        else:
            self.in_order = False

    def newest(self) -> tuple[float, float] | None:
        """``(t, value)`` of the sample with the greatest timestamp, or ``None`` if empty."""
        n = len(self.ts)
        if n == 0:
            return None
        if self.in_order:
            i = (self.head - 1) % n
            return self.ts[i], self.vs[i]
        best = max(range(n), key=self._chrono_t)
        return self.ts[best], self.vs[best]

    def t_newest(self) -> float:
        item = self.newest()
        return float("-inf") if item is None else item[0]

    def t_oldest(self) -> float:
        """Timestamp of the oldest append still held (``inf`` when empty)."""
        return self.ts[self.head] if self.ts else float("inf")

    def _chrono_t(self, physical: int) -> tuple[float, int]:
        # Ties on t go to the later append: rank by position in append order.
        n = len(self.ts)
        return self.ts[physical], (physical - self.head) % n

    def chronological(self) -> tuple[array[float], array[float]]:
        """Copies of all samples, oldest append first."""
        h = self.head
        if h == 0:
            return self.ts[:], self.vs[:]
        return self.ts[h:] + self.ts[:h], self.vs[h:] + self.vs[:h]

    def _t_at(self, logical: int) -> float:
        return self.ts[(self.head + logical) % len(self.ts)]

    def _lower(self, t: float) -> int:
        """First logical index with timestamp >= t (in-order series only)."""
        ts, h = self.ts, self.head
        n = len(ts)
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if ts[(h + mid) % n] < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _upper(self, t: float) -> int:
        """First logical index with timestamp > t (in-order series only)."""
        lo, hi = 0, len(self.ts)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._t_at(mid) <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _copy(self, src: array[float], a: int, b: int) -> array[float]:
        """Logical slice [a, b) of a physical array, as at most two C-level slice copies."""
        n = len(src)
        pa, pb = self.head + a, self.head + b
        if pb <= n:
            return src[pa:pb]
        if pa >= n:
            return src[pa - n : pb - n]
        return src[pa:] + src[: pb - n]

    def window(self, start: float, end: float) -> Window | None:
        """Samples with ``start <= t <= end``, or ``None`` if there are none."""
        if not self.ts:
            return None
        if self.in_order:
            # The usual window ends at "now", after the newest sample: skip the second search then.
            b = len(self.ts) if self.t_last <= end else self._upper(end)
            a = self._lower(start)
            if a >= b:
                return None
            vals = self._copy(self.vs, a, b)
            return Window(vals, self._t_at(a), self._t_at(b - 1), vals[-1])
        ts, vs = self.chronological()
        picked = [i for i, t in enumerate(ts) if start <= t <= end]
        if not picked:
            return None
        vals = array("d", [vs[i] for i in picked])
        times = [ts[i] for i in picked]
        t_max = max(times)
        last_i = max(j for j, t in enumerate(times) if t == t_max)
        return Window(vals, min(times), t_max, vals[last_i])

    def reset(self, ts: array[float], vs: array[float]) -> None:
        """Replace the contents with the newest ``capacity`` of the given samples (kept in that order)."""
        if len(ts) != len(vs):
            raise ValueError(f"{len(ts)} timestamps for {len(vs)} values")
        skip = max(len(ts) - self.capacity, 0)
        self.ts, self.vs = array("d", ts[skip:]), array("d", vs[skip:])
        self.head = 0
        # One C-level sort is far cheaper than a Python loop over every sample.
        ordered = sorted(self.ts)
        self.in_order = ordered == self.ts.tolist()
        self.t_last = ordered[-1] if ordered else float("-inf")
