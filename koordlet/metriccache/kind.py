"""One metric kind's series in the cache: which share the kind's timeline, which keep a private ring.

Layer: ``koordlet.metriccache`` (used under :class:`~koordlet.metriccache.cache.MetricCache`'s lock). A
batch of one collector tick goes into the timeline's slots (:mod:`koordlet.metriccache.timeline`); a series
that misses a tick, gets a second sample in one, or a sample off the timeline moves to a private
:class:`~koordlet.metriccache.ring.Ring` with exactly the same samples.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from itertools import compress
from operator import attrgetter, is_not, ne

from koordlet.api.metrics import PROPERTIES
from koordlet.metriccache.ring import Ring
from koordlet.metriccache.timeline import SharedRing, Timeline
from koordshared.runtime.errors import InvalidValue

SeriesKey = str | tuple[tuple[str, str], ...]
"""Canonical key of one series within a kind: a kind with one property is keyed by that property's value
(``"<pod uid>"``), a kind with none by ``()``, any other by the ``(name, value)`` pairs sorted by name, so
the collectors' bulk path can hand in keys it built once."""


def series_key(metric: str, labels: Mapping[str, str] | None) -> SeriesKey:
    """The canonical key of the series ``labels`` of ``metric``; checks a known kind's schema exactly."""
    labels = labels or {}
    props = PROPERTIES.get(metric)
    if props is not None:
        if len(labels) != len(props) or any(p not in labels for p in props):
            raise InvalidValue(metric, dict(labels), f"properties must be exactly {list(props)}")
        if len(props) == 1:
            return str(labels[props[0]])
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def normalize_key(metric: str, key: SeriesKey) -> SeriesKey:
    """Turn a caller's key (a bare value, or pairs in any order) into the canonical one."""
    if isinstance(key, str):
        props = PROPERTIES.get(metric)
        if props is None or len(props) != 1:
            raise InvalidValue(metric, key, "a bare value key needs a kind with exactly one property")
        return key
    return series_key(metric, dict(key))


def key_labels(metric: str, key: SeriesKey) -> dict[str, str]:
    """The label set a canonical key stands for."""
    if isinstance(key, str):
        return {PROPERTIES[metric][0]: key}
    return dict(key)


class Series:
    """A series' samples (on its kind's timeline or in a private ring) plus the label set it was created
    with (shared with :meth:`MetricCache.latest` callers)."""

    __slots__ = ("labels", "ring")

    def __init__(self, ring: Ring | SharedRing, labels: Mapping[str, str]) -> None:
        self.ring = ring
        self.labels = labels


_COL = attrgetter("col")


class Memo:
    """A batch that named every attached series of a kind once, in the order it named them."""

    __slots__ = ("cols", "keys", "rings", "start", "ticks", "timeline")

    def __init__(self, keys: Sequence[SeriesKey], timeline: Timeline, rings: list[SharedRing]) -> None:
        self.keys = keys if isinstance(keys, tuple) else tuple(keys)
        self.timeline = timeline
        self.ticks = timeline.ticks
        """The timeline's ticks after the batch: a tick since means the memo no longer holds."""
        self.rings = rings
        self.cols: list[int] = list(map(_COL, rings))
        cols = self.cols
        self.start = cols[0] if cols and cols == list(range(cols[0], cols[0] + len(cols))) else -1
        """The first of the columns when they are consecutive in the keys' order (one slice a tick), else
        -1."""

    def holds(self, tl: Timeline) -> bool:
        """Its rings are still every series attached to ``tl``: no tick, no detach, no drop since (each
        changes the ticks, the members or the timeline)."""
        return self.timeline is tl and self.ticks == tl.ticks and len(self.rings) == tl.members


class Kind:
    """All series of one metric kind."""

    __slots__ = ("capacity", "memo", "props", "series", "timeline")

    def __init__(self, metric: str, capacity: int) -> None:
        self.capacity = capacity
        self.props = PROPERTIES.get(metric)
        self.series: dict[SeriesKey, Series] = {}
        self.timeline = Timeline(capacity)
        self.memo: Memo | None = None
        """The last batch's rings when its keys named every attached series once (see
        :meth:`MetricCache.append_columns`)."""

    def private(self, series: Series) -> Ring:
        """The series' private ring, made from its timeline samples if it was attached."""
        ring = series.ring
        if isinstance(ring, SharedRing):
            ring = series.ring = ring.detached()
            self.timeline.members -= 1
        return ring

    def forget(self, series: Series) -> None:
        if isinstance(series.ring, SharedRing):
            series.ring.release()
            self.timeline.members -= 1

    def new_series(self, metric: str, key: SeriesKey, tick: int | None = None) -> Series:
        """The series of ``key`` (any spelling), made if new: on the timeline from ``tick`` when given."""
        canonical = normalize_key(metric, key)
        series = self.series.get(canonical)
        if series is None:
            if tick is None:
                ring: Ring | SharedRing = Ring(self.capacity)
            else:
                ring = SharedRing(self.timeline, tick)
                self.timeline.members += 1
            series = self.series[canonical] = Series(ring, key_labels(metric, canonical))
        return series

    def append_tick(self, metric: str, keys: Sequence[SeriesKey], values: Sequence[float], t: float) -> int:
        """One sample per key at ``t`` (see :meth:`MetricCache.append_columns`)."""
        tl = self.timeline
        memo = self.memo
        if memo is not None and memo.holds(tl) and t >= tl.t_last:
            # The last batch's rings are every attached one, all due. The same keys take them as they
            # are; keys differing in a few places have only those places looked up.
            if memo.keys is not keys:
                rings = self._followed(metric, memo, keys)
                memo = None if rings is None else Memo(keys, tl, rings)
            if memo is not None:
                base = tl.ticks % tl.capacity * tl.width
                block = tl.block
                start = memo.start
                if start >= 0:
                    block[base + start : base + start + len(keys)] = array("d", values)
                else:
                    for col, value in zip(memo.cols, values, strict=True):
                        block[base + col] = value
                tl.push(t)
                memo.ticks = tl.ticks
                self.memo = memo
                return len(keys)
        self.memo = None
        known = self.series
        if t < tl.t_last:  # earlier than the timeline's newest tick: appended privately
            for key, value in zip(keys, values, strict=True):
                series = known.get(key)
                if series is None:
                    series = self.new_series(metric, key)
                self.private(series).append(t, value)
            return len(keys)
        # Values go into the upcoming tick's slot first; the timestamp is pushed after the series
        # that missed this tick were detached, so they keep the oldest sample it overwrites.
        tick = tl.ticks
        tl.reserve(len(keys) - sum(map(known.__contains__, keys)))
        again: list[tuple[Series, float]] = []
        hit_rings: list[SharedRing] = []
        hit_values: list[float] = []
        written: set[SharedRing] = set()
        for key, value in zip(keys, values, strict=True):
            series = known.get(key)
            if series is None:
                series = self.new_series(metric, key, tick)
            ring = series.ring
            if isinstance(ring, SharedRing):
                if ring not in written:
                    written.add(ring)
                    hit_rings.append(ring)
                    hit_values.append(value)
                else:  # a second sample in this tick: appended once the tick is in place
                    again.append((series, value))
            else:
                ring.append(t, value)
        # columns are settled now: new series may have grown the block
        base = tick % tl.capacity * tl.width
        block = tl.block
        for ring, value in zip(hit_rings, hit_values, strict=True):
            block[base + ring.col] = value
        hits = len(hit_rings)
        if hits < tl.members:
            for series in known.values():
                ring = series.ring
                if type(ring) is SharedRing and ring not in written:
                    series.ring = ring.detached()
                    tl.members -= 1
        tl.push(t)
        for series, value in again:
            self.private(series).append(t, value)
        if hits == len(keys) == tl.members:
            memo = Memo(keys, tl, hit_rings)
            if memo.start < 0 and sum(map(ne, memo.cols, range(hits))) <= max(8, hits >> 3):
                # a few series out of the batch's order: their columns moved, one slice a tick again
                tl.widen(hits)
                tl.line_up([(i, ring) for i, ring in enumerate(hit_rings) if ring.col != i])
                memo = Memo(keys, tl, hit_rings)
            self.memo = memo
        return len(keys)

    def _followed(self, metric: str, memo: Memo, keys: Sequence[SeriesKey]) -> list[SharedRing] | None:
        """The rings for ``keys`` from the last batch's (every attached series) when they differ in a few
        places; the series no longer listed are detached and new ones attached. ``None``, with nothing
        changed, when the per-key path must decide (many places differ, a key listed twice or in a
        spelling other than the canonical one, a private series coming back)."""
        was, rings = memo.keys, memo.rings
        n, m = len(keys), len(was)
        if not m:
            return None
        common = min(n, m)
        # a C-level comparison: the collectors hand in the same key objects where nothing changed
        places = [*compress(range(common), map(is_not, keys, was)), *range(common, n)]
        if len(places) > max(8, n >> 3):
            return None
        out = {was[i]: rings[i] for i in places if i < m}
        for i in range(common, m):
            out[was[i]] = rings[i]
        known = self.series
        found: dict[SeriesKey, SharedRing | None] = {}
        for i in places:
            key = keys[i]
            if key in found:
                return None  # listed twice
            ring = out.pop(key, None)
            if ring is None:
                series = known.get(key)
                # an attached series not among the changed places is listed at another place too
                if series is not None or normalize_key(metric, key) != key:
                    return None
            found[key] = ring
        gone: list[Series] = []
        for key, ring in out.items():
            series = known.get(key)
            if series is None or series.ring is not ring:
                return None
            gone.append(series)
        tl = self.timeline
        if memo.start >= 0:
            tl.widen(memo.start + n)
        # the places past the last batch's end hold a placeholder until their ring is set below
        followed = rings[:n] + rings[:1] * (n - m)
        for series in gone:
            self.private(series)
        for i in places:
            key = keys[i]
            ring = found[key]
            if ring is None:
                new = self.new_series(metric, key, tl.ticks).ring
                assert isinstance(new, SharedRing)
                ring = new
            followed[i] = ring
        if memo.start >= 0:
            tl.line_up([(memo.start + i, followed[i]) for i in places])
        return followed

    def reshare(self) -> int:
        """Put private series back on the timeline once their samples are exactly its newest ticks (a
        series that missed a tick is held privately until the samples before the miss age out of its
        ring, then it shares again); returns how many. Checked by a few comparisons first, so a series
        that cannot rejoin costs no copy.

        Without this, every miss (a read that failed once, a sweep that skipped a container) left a
        series private for good, at twice the bytes a sample, and over hours most series were."""
        tl = self.timeline
        joined = 0
        for series in self.series.values():
            ring = series.ring
            if type(ring) is not Ring or not ring.in_order:
                continue
            n = len(ring)
            first = tl.ticks - n
            if (
                not n
                or first < tl.oldest()
                or ring.t_newest() != tl.t_last
                or ring.t_oldest() != tl.t_at(first)
            ):
                continue
            ts, vs = ring.chronological()
            if ts != tl.chronological()[-n:]:
                continue
            shared = SharedRing(tl, first)
            for i, v in enumerate(vs):
                shared.put(first + i, v)
            series.ring = shared
            tl.members += 1
            joined += 1
        if joined:
            self.memo = None
        self.compact()
        return joined

    def compact(self) -> None:
        """Repack the timeline's block when most of its columns are free (pods gone for good)."""
        tl = self.timeline
        if len(tl.free) > max(64, tl.width >> 1):
            memo = self.memo
            if memo is not None and memo.holds(tl):
                # in the last batch's order: the next one with these keys is one slice
                tl.repack(memo.rings)
                self.memo = Memo(memo.keys, tl, memo.rings)
            else:
                tl.repack([s.ring for s in self.series.values() if type(s.ring) is SharedRing])
                self.memo = None

    def share_restored(self) -> None:
        """Put restored series back on a timeline (the one of the newest series) when their timestamps are
        its newest ones, as they are when one collector appended them together before the restart.

        Only while no series is attached yet: a timeline that appends raced onto is left as it is."""
        if self.timeline.members:
            return
        rings = [(s, s.ring) for s in self.series.values() if type(s.ring) is Ring]
        cands = [(s, r) for s, r in rings if r.in_order and len(r)]
        if not cands:
            return
        ref_ts, _ = max(cands, key=lambda c: (c[1].t_newest(), len(c[1])))[1].chronological()
        tl = self.timeline = Timeline(self.capacity)
        for t in ref_ts:
            tl.push(t)
        for series, ring in cands:
            ts, vs = ring.chronological()
            first = tl.ticks - len(ts)
            if ts != ref_ts[len(ref_ts) - len(ts) :]:
                continue
            shared = SharedRing(tl, first)
            for i, v in enumerate(vs):
                shared.put(first + i, v)
            series.ring = shared
            tl.members += 1
