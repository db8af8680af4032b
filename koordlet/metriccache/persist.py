"""Between the live cache and the checkpoint file: clock conversion, retention cut, size bound, recovery.

Live timestamps are monotonic seconds, which restart from zero at every boot. A checkpoint therefore stores
epoch seconds: ``epoch = t + offset`` with ``offset = wall_clock() - clock()`` taken at save time, and the
load maps back with the offset of the loading process. History thus survives an agent restart and a
reboot. Samples that come back older than their retention are dropped; samples that come back in the
future (the wall clock was stepped back in between) are dropped too, since a future sample would shadow
every new one as ``last``.
"""

from __future__ import annotations

import bisect
import logging
import os
from array import array
from collections.abc import Iterable
from pathlib import Path

from koordlet.metriccache import checkpoint
from koordlet.metriccache.checkpoint import FILE_NAME, Image, SeriesImage
from koordlet.metriccache.config import Family, MetricCacheConfig, family_of
from koordlet.metriccache.kind import Kind, Series, SeriesKey, key_labels, series_key
from koordlet.metriccache.ring import Ring
from koordlet.metriccache.timeline import SharedRing
from koordlet.system import atomicfile
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)


Restored = dict[tuple[str, SeriesKey], tuple[dict[str, str], "array[float]", "array[float]"]]


def ordered(ring: Ring | SharedRing) -> tuple[array[float], array[float]]:
    """Copies of a ring's samples sorted by timestamp (append order among equal timestamps)."""
    ts, vs = ring.chronological()
    if ring.in_order:
        return ts, vs
    pairs = sorted(zip(ts, vs, strict=True), key=lambda p: p[0])
    return array("d", [p[0] for p in pairs]), array("d", [p[1] for p in pairs])


class KindCopy:
    """One kind's series in epoch time, copied out one at a time (each call under the cache's lock).

    Lean on purpose: the series on the kind's timeline get views into one epoch copy of its timestamps
    and only their values are copied, one series at a time, as the checkpoint is written (copying all
    at once held several copies of the cache as resident memory). Made under the lock; a series
    changed since is copied as it is when its turn comes.
    """

    def __init__(self, metric: str, kind: Kind, offset: float, cut: float) -> None:
        tl = kind.timeline
        self.metric, self.offset, self.cut = metric, offset, cut
        self.oldest, self.ticks = tl.oldest(), tl.ticks
        self.epoch = memoryview(_shifted(tl.chronological(), offset))
        self.first = self.oldest + bisect.bisect_left(self.epoch, cut)
        self.series = list(kind.series.values())

    def copy(self, series: Series) -> SeriesImage | None:
        """The series' samples within retention (``None``: none)."""
        ring, labels = series.ring, dict(series.labels)
        if isinstance(ring, SharedRing):
            lo, hi = ring.span()
            lo, hi = max(lo, self.first), min(hi, self.ticks)
            if hi <= lo:
                return None
            return SeriesImage(
                self.metric, labels, self.epoch[lo - self.oldest : hi - self.oldest], ring.values(lo, hi)
            )
        ts, vs = ordered(ring)
        ts = _shifted(ts, self.offset)
        first = bisect.bisect_left(ts, self.cut)
        if first >= len(ts):
            return None
        return SeriesImage(self.metric, labels, ts[first:], vs[first:])


def _shifted(ts: array[float], offset: float) -> array[float]:
    return array("d", map(offset.__add__, ts))


def _trim_first(metric: str) -> bool:
    return family_of(metric) is Family.POD


def save(config: MetricCacheConfig, image: Image) -> tuple[int, int]:
    """Bound ``image`` by ``tsdb_max_bytes`` and write it; returns ``(bytes written, samples trimmed)``."""
    assert config.tsdb_path is not None
    image, trimmed = checkpoint.fit(image, config.tsdb_max_bytes, _trim_first)
    if trimmed and checkpoint.estimated_size(image) > config.tsdb_max_bytes:
        log.error(
            "metric cache: the checkpoint exceeds --tsdb-max-bytes=%d even without samples",
            config.tsdb_max_bytes,
        )
    return save_stream(config, image.saved_at, image.series), trimmed


def save_stream(config: MetricCacheConfig, saved_at: float, series: Iterable[SeriesImage]) -> int:
    """Write the series as ``series`` yields them (unbounded: the caller checked the size); returns the
    bytes written."""
    assert config.tsdb_path is not None
    config.tsdb_path.mkdir(parents=True, exist_ok=True)
    return atomicfile.write_atomic(
        config.tsdb_path / FILE_NAME, checkpoint.encode(saved_at, series), mode=0o600
    )


def read(directory: Path) -> Image:
    """Decode ``<directory>/metriccache.ckpt``; raises ``FileNotFoundError``, ``OSError`` or
    :class:`~koordlet.metriccache.checkpoint.CorruptCheckpoint`."""
    path = directory / FILE_NAME
    atomicfile.remove_stale_temps(path)
    return checkpoint.decode(path.read_bytes())


def move_aside(directory: Path) -> None:
    """Keep a bad checkpoint for inspection as ``*.corrupt`` (replacing an older one)."""
    path = directory / FILE_NAME
    try:
        os.replace(path, path.with_name(path.name + ".corrupt"))
    except OSError as err:
        log.warning("metric cache: cannot move %s aside: %s", path, err)


def from_image(image: Image, config: MetricCacheConfig, *, now: float, offset: float) -> tuple[Restored, int]:
    """Series of ``image`` back in monotonic time within retention; also how many series were invalid."""
    restored: Restored = {}
    skipped = 0
    for s in image.series:
        try:
            key = series_key(s.metric, s.labels)
        except InvalidValue:
            skipped += 1
            continue
        if len(s.ts) != len(s.vs):
            skipped += 1
            continue
        # Saved series are ascending in time, so the retention window is one slice.
        mono = array("d", [t - offset for t in s.ts])
        lo = bisect.bisect_left(mono, now - config.retention_for(s.metric))
        hi = bisect.bisect_right(mono, now)
        if lo >= hi:
            continue
        ts, vs = mono[lo:hi], array("d", s.vs[lo:hi])
        prev = restored.get((s.metric, key))
        if prev is not None:
            ts, vs = prev[1] + ts, prev[2] + vs
        restored[(s.metric, key)] = (key_labels(s.metric, key), ts, vs)
    return restored, skipped
