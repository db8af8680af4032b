"""Timestamps shared by the series of one metric kind appended together, one collector tick at a time.

Why: a collector appends every series of a kind with the same timestamp each tick (``append_batch``), so
per-series timestamp arrays hold the same numbers thousands of times: half of the history's memory. A
:class:`Timeline` keeps each tick's timestamp once; an attached series (:class:`SharedRing`) keeps only its
values, in its column of the timeline's block (one tick's values side by side, so a collector's tick is
written in a few memory lines), for the ticks from the one it joined at to the newest. It must be appended
at every tick: the cache detaches a series that misses one (or gets a second sample in a tick, or a sample
off the tick) into a private :class:`koordlet.metriccache.ring.Ring` holding exactly the same samples, so
queries see the same samples either way. 1000 containers x 2 metrics x 30 minutes: ~29 MB instead of ~58 MB.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from array import array

from koordlet.metriccache.ring import Ring, Window


class Timeline:
    """The timestamps of the newest ``capacity`` ticks of one metric kind, and its attached series' values:
    one block, tick slot by tick slot, a column per series (a tick's values are then side by side in
    memory, not one line of each series' own array: the collector's write of a tick touches a few
    contiguous lines)."""

    __slots__ = ("block", "capacity", "free", "members", "t_last", "ticks", "ts", "width")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.ts: array[float] = array("d")
        self.ticks = 0
        """Ticks ever pushed; the newest is ``ticks - 1``."""
        self.t_last = float("-inf")
        self.members = 0
        """Series attached now (the cache detaches those a tick missed)."""
        self.width = 0
        """Columns of :attr:`block`: the value of column ``c`` at slot ``s`` is ``block[s * width + c]``."""
        self.block: array[float] = array("d")
        self.free: list[int] = []
        """Columns no attached series holds, the next one to hand out last."""

    def push(self, t: float) -> int:
        """Start tick ``t`` (not earlier than the last one); returns its number."""
        tick = self.ticks
        if tick < self.capacity:
            self.ts.append(t)
        else:
            self.ts[tick % self.capacity] = t
        self.ticks = tick + 1
        self.t_last = t
        return tick

    def reserve(self, more: int) -> None:
        """Room for ``more`` series joining (a batch of new series grows the block once)."""
        if len(self.free) < more:
            self._grow(more - len(self.free))

    def widen(self, width: int) -> None:
        """At least ``width`` columns (an eighth more when it grows: pods added one by one grow it seldom)."""
        if width > self.width:
            self._grow(max(width - self.width, 8, self.width >> 3))

    def line_up(self, moves: list[tuple[int, SharedRing]]) -> None:
        """Each ring's values into the column given beside it (one the ring holds, a free one, or one
        another ring moves out of): a batch's series then sit in its order, one slice a tick."""
        moves = [(col, ring) for col, ring in moves if ring.col != col]
        if not moves:
            return
        w, block = self.width, self.block
        held = [block[ring.col :: w] for _, ring in moves]  # all read before any is overwritten
        for (col, _), values in zip(moves, held, strict=True):
            block[col::w] = values
        free = set(self.free)
        free.update(ring.col for _, ring in moves)
        free.difference_update(col for col, _ in moves)
        self.free = sorted(free, reverse=True)
        for col, ring in moves:
            ring.col = col

    def column(self) -> int:
        """A free column for a series joining (the block grows by an eighth when none is)."""
        if not self.free:
            self._grow(max(8, self.width >> 3))
        return self.free.pop()

    def release(self, column: int) -> None:
        self.free.append(column)

    def _grow(self, more: int) -> None:
        w, cap = self.width, self.capacity
        nw = w + max(more, 0)
        if nw <= w:
            return
        old, block = self.block, array("d", [0.0]) * (cap * nw)
        if w:
            for s in range(cap):
                block[s * nw : s * nw + w] = old[s * w : s * w + w]
        self.block, self.width = block, nw
        self.free[:0] = range(nw - 1, w - 1, -1)

    def repack(self, rings: list[SharedRing]) -> None:
        """A block of just the columns of ``rings`` (every attached series), numbered anew in their order:
        the memory of series gone for good is handed back."""
        w, cap, old = self.width, self.capacity, self.block
        n = len(rings)
        nw = n + (n >> 3)
        block = array("d", [0.0]) * (cap * nw)
        for c, ring in enumerate(rings):
            block[c::nw] = old[ring.col :: w]
            ring.col = c
        self.block, self.width = block, nw
        self.free = list(range(nw - 1, n - 1, -1))

    def oldest(self) -> int:
        """Number of the oldest tick still held."""
        return max(0, self.ticks - self.capacity)

    def t_at(self, tick: int) -> float:
        return self.ts[tick % self.capacity]

    def chronological(self) -> array[float]:
        """The timestamps of every tick held, oldest first (a copy)."""
        if self.ticks <= self.capacity:
            return array("d", self.ts)
        cut = self.ticks % self.capacity
        return self.ts[cut:] + self.ts[:cut]


_NEVER = 1 << 62
"""The first tick of a ring that left its timeline: later than any tick, so it holds none."""


class SharedRing:
    """One series' values on a :class:`Timeline` (its column of the block): the ticks from ``first`` to
    the timeline's newest still held. An attached series has a value at every tick since it joined (the
    cache detaches one that misses a tick), so its newest tick is the timeline's."""

    __slots__ = ("col", "first", "timeline")

    in_order = True
    """Timelines only move forward."""

    def __init__(self, timeline: Timeline, tick: int) -> None:
        self.timeline = timeline
        self.col = timeline.column()
        self.first = tick

    @property
    def last(self) -> int:
        """The newest tick this series holds."""
        return self.timeline.ticks - 1

    def put(self, tick: int, v: float) -> None:
        tl = self.timeline
        tl.block[tick % tl.capacity * tl.width + self.col] = v

    def _span(self) -> tuple[int, int]:
        """Ticks [lo, hi) this series holds."""
        return max(self.first, self.timeline.oldest()), self.last + 1

    def span(self) -> tuple[int, int]:
        """Ticks [lo, hi) this series holds (``hi <= lo``: none)."""
        return self._span()

    def values(self, lo: int, hi: int) -> array[float]:
        """A copy of the values of ticks [lo, hi), oldest first."""
        return self._column(lo, hi)

    def __len__(self) -> int:
        lo, hi = self._span()
        return max(0, hi - lo)

    def newest(self) -> tuple[float, float] | None:
        lo, hi = self._span()
        if hi <= lo:
            return None
        cap = self.timeline.capacity
        slot = self.last % cap
        return self.timeline.ts[slot], self.timeline.block[slot * self.timeline.width + self.col]

    def t_newest(self) -> float:
        item = self.newest()
        return float("-inf") if item is None else item[0]

    def _copy(self, src: array[float], a: int, b: int) -> array[float]:
        """Ticks [a, b) of a slot array, as at most two C-level slice copies."""
        cap = self.timeline.capacity
        pa, pb = a % cap, b - a + a % cap
        if pb <= cap:
            return src[pa:pb]
        return src[pa:] + src[: pb - cap]

    def _column(self, a: int, b: int) -> array[float]:
        """The values of ticks [a, b) (held ones), as at most two C-level strided slice copies."""
        if b <= a:
            return array("d")
        tl = self.timeline
        cap, w, col, block = tl.capacity, tl.width, self.col, tl.block
        pa, pb = a % cap, b - a + a % cap
        if pb <= cap:
            return block[pa * w + col : (pb - 1) * w + col + 1 : w]
        return block[pa * w + col :: w] + block[col : (pb - cap - 1) * w + col + 1 : w]

    def chronological(self) -> tuple[array[float], array[float]]:
        lo, hi = self._span()
        if hi <= lo:
            return array("d"), array("d")
        return self._copy(self.timeline.ts, lo, hi), self._column(lo, hi)

    def _lower(self, lo: int, hi: int, t: float) -> int:
        """First tick in [lo, hi) with timestamp >= t."""
        at = self.timeline.t_at
        while lo < hi:
            mid = (lo + hi) // 2
            if at(mid) < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _upper(self, lo: int, hi: int, t: float) -> int:
        """First tick in [lo, hi) with timestamp > t."""
        at = self.timeline.t_at
        while lo < hi:
            mid = (lo + hi) // 2
            if at(mid) <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def window(self, start: float, end: float) -> Window | None:
        """Samples with ``start <= t <= end``, or ``None`` if there are none (as :meth:`Ring.window`)."""
        lo, hi = self._span()
        if hi <= lo:
            return None
        at = self.timeline.t_at
        b = hi if at(hi - 1) <= end else self._upper(lo, hi, end)
        a = self._lower(lo, b, start)
        if a >= b:
            return None
        vals = self._column(a, b)
        return Window(vals, at(a), at(b - 1), vals[-1])

    def detached(self) -> Ring:
        """A private ring with exactly this series' samples (for a series leaving the timeline, whose
        column is handed back)."""
        ring = Ring(self.timeline.capacity)
        ts, vs = self.chronological()
        ring.reset(ts, vs)
        self.release()
        return ring

    def release(self) -> None:
        """Hand the column back (the series left the timeline); this object then holds no samples."""
        if self.col >= 0:
            self.timeline.release(self.col)
            self.col = -1
            self.first = _NEVER
