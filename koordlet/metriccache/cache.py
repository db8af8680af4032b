"""The metric cache: per-kind typed ring-buffer series, windowed aggregation, persistence.

Koordlet's ``MetricCache`` TSDB re-done in memory (its KVStorage has no reader here, so it is left out).
Series appended together by ``append_batch`` share their timestamps (:mod:`koordlet.metriccache.timeline`);
any other series keeps a private :class:`~koordlet.metriccache.ring.Ring`, with the same samples. One lock
guards everything: appends are O(1) array writes and queries hold it only to copy their window
out (C-level slices), so aggregation, sorting and checkpoint encoding run unlocked. Timestamps are the
injected monotonic clock's seconds, so windows never move with wall-clock steps; the wall clock is only
used to stamp checkpoints (see :mod:`koordlet.metriccache.persist`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry

from koordlet.api import Aggregation, QueryResult
from koordlet.metriccache import persist
from koordlet.metriccache.aggregate import DEFAULT_AGGS, Aggregates, aggregate_windows, normalize_agg
from koordlet.metriccache.checkpoint import FILE_NAME, CorruptCheckpoint, Image, SeriesImage
from koordlet.metriccache.config import Family, MetricCacheConfig, family_of
from koordlet.metriccache.kind import Kind, Series, SeriesKey, series_key
from koordlet.metriccache.ring import Ring, Window
from koordlet.metriccache.selfmetrics import CacheStats, MetricCacheCollector

log = logging.getLogger(__name__)

_SERIES_META_BYTES = 200
"""A series' share of the checkpoint's description, at most (metric, labels, count as JSON)."""

Clock = Callable[[], float]


class MetricCache:
    """Thread-safe time series; implements :class:`koordlet.api.MetricReader`."""

    def __init__(
        self,
        config: MetricCacheConfig | None = None,
        *,
        clock: Clock = time.monotonic,
        wall_clock: Clock = time.time,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config or MetricCacheConfig()
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_error = ""
        """Serialises whole checkpoints: they share one temp file name and must not interleave."""
        self._kinds: dict[str, Kind] = {}
        self._stats = CacheStats()
        if registry is not None:
            registry.register(MetricCacheCollector(self))

    # ---- appends ---------------------------------------------------------------------------------

    def _kind(self, metric: str) -> Kind:
        kind = self._kinds.get(metric)
        if kind is None:
            kind = self._kinds[metric] = Kind(metric, self.config.capacity_for(metric))
        return kind

    def append(
        self, metric: str, labels: Mapping[str, str] | None, value: float, t: float | None = None
    ) -> None:
        """Add one sample; ``labels`` must be exactly the kind's properties (``InvalidValue`` if not)."""
        key = series_key(metric, labels)
        if t is None:
            t = self._clock()
        with self._lock:
            kind = self._kind(metric)
            series = kind.series.get(key)
            if series is None:
                series = kind.new_series(metric, key)
            kind.private(series).append(t, value)

    def append_batch(
        self, metric: str, samples: Iterable[tuple[SeriesKey, float]], t: float | None = None
    ) -> int:
        """Add one sample per series at the same time ``t``: the collector's per-tick path.

        Keys are canonical (:func:`koordlet.metriccache.kind.series_key`): the property value for
        one-property kinds (``pod_uid``, ``container_id``), ``()`` for kinds without properties, else the
        ``(name, value)`` pairs sorted by name. Other spellings are accepted but take a slower path.
        """
        items = samples if isinstance(samples, list) else list(samples)
        return self.append_columns(metric, [k for k, _ in items], [v for _, v in items], t)

    def append_columns(
        self, metric: str, keys: Sequence[SeriesKey], values: Sequence[float], t: float | None = None
    ) -> int:
        """:meth:`append_batch` with keys and values in two lists: a collector of a thousand pods then
        allocates no tuple per sample (less work for the allocator and the cyclic GC). A collector that
        passes the same tuple of keys every tick skips the per-key lookups while nothing has changed."""
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        if not keys:
            return 0
        if t is None:
            t = self._clock()
        with self._lock:
            kind = self._kind(metric)
            return kind.append_tick(metric, keys, values, t)

    # ---- queries ---------------------------------------------------------------------------------

    def _matching(self, metric: str, labels: Mapping[str, str] | None) -> list[Series]:
        kind = self._kinds.get(metric)
        if kind is None:
            return []
        if not labels:
            return list(kind.series.values())
        props = kind.props
        if props is not None and len(labels) == len(props) and all(p in labels for p in props):
            # A full label set of a known kind names at most one series: look it up directly.
            key = labels[props[0]] if len(props) == 1 else tuple(sorted(labels.items()))
            hit = kind.series.get(key)
            return [] if hit is None else [hit]
        wanted = list(labels.items())
        return [s for s in kind.series.values() if all(s.labels.get(k) == v for k, v in wanted)]

    def _windows(self, metric: str, window: float, labels: Mapping[str, str] | None) -> list[Window]:
        if not window > 0:
            raise ValueError(f"window must be positive seconds, got {window}")
        end = self._clock()
        start = end - window
        with self._lock:
            found = [s.ring.window(start, end) for s in self._matching(metric, labels)]
        return [w for w in found if w is not None]

    def aggregate(
        self,
        metric: str,
        *,
        window: float,
        aggs: Sequence[str] = DEFAULT_AGGS,
        labels: Mapping[str, str] | None = None,
    ) -> Aggregates | None:
        """Several aggregations over the last ``window`` seconds of every series matching ``labels``
        (any subset of the properties), with sample count and time span; ``None`` without samples."""
        names = [normalize_agg(a) for a in aggs]
        return aggregate_windows(self._windows(metric, window, labels), names)

    def query(
        self,
        metric: str,
        *,
        window: float,
        agg: Aggregation = "last",
        labels: Mapping[str, str] | None = None,
    ) -> QueryResult | None:
        """One aggregation over the last ``window`` seconds (:class:`koordlet.api.MetricReader`)."""
        name = normalize_agg(agg)
        result = aggregate_windows(self._windows(metric, window, labels), [name])
        if result is None:
            return None
        return QueryResult(value=result.values[name], count=result.count, duration=result.duration)

    def latest(self, metric: str) -> list[tuple[Mapping[str, str], float, float]]:
        """``(labels, t, value)`` of the newest sample of every series of ``metric`` (for scrapes).
        The label mappings are the cache's own: read them, do not modify them."""
        out: list[tuple[Mapping[str, str], float, float]] = []
        with self._lock:
            kind = self._kinds.get(metric)
            if kind is None:
                return out
            for series in kind.series.values():
                newest = series.ring.newest()
                if newest is not None:
                    out.append((series.labels, newest[0], newest[1]))
        return out

    def metrics(self) -> list[str]:
        """Metric kinds that have at least one series."""
        with self._lock:
            return sorted(m for m, k in self._kinds.items() if k.series)

    def series(self, metric: str) -> list[dict[str, str]]:
        """The label sets of ``metric``'s series."""
        with self._lock:
            kind = self._kinds.get(metric)
            return [] if kind is None else [dict(s.labels) for s in kind.series.values()]

    # ---- removal ---------------------------------------------------------------------------------

    def _drop(self, keep_if: Callable[[str, Series], bool], only: str | None = None) -> int:
        dropped = 0
        with self._lock:
            for metric, kind in self._kinds.items():
                if only is not None and metric != only:
                    continue
                doomed = [k for k, s in kind.series.items() if not keep_if(metric, s)]
                for key in doomed:
                    kind.forget(kind.series.pop(key))
                dropped += len(doomed)
        return dropped

    def drop_where(self, label: str, value: str) -> int:
        """Remove every series, of any kind, whose ``label`` equals ``value`` (a deleted pod's uid)."""
        return self._drop(lambda _m, s: s.labels.get(label) != value)

    def gc(self, older_than: float) -> int:
        """Remove series whose newest sample is older than ``older_than`` (monotonic seconds)."""
        return self._drop(lambda _m, s: s.ring.t_newest() >= older_than)

    def expire(self) -> int:
        """Remove series with no sample within their family's retention, and put private series whose
        samples are their timeline's newest ticks back on it (``Kind.reshare``)."""
        now = self._clock()
        cutoffs = {f: now - self.config.retention(f) for f in Family}
        dropped = self._drop(lambda m, s: s.ring.t_newest() >= cutoffs[family_of(m)])
        with self._lock:
            for kind in self._kinds.values():
                kind.reshare()
        return dropped

    # ---- stats -----------------------------------------------------------------------------------

    def stats(self) -> CacheStats:
        with self._lock:
            series = {m: len(k.series) for m, k in self._kinds.items() if k.series}
            samples = sum(len(s.ring) for k in self._kinds.values() for s in k.series.values())
            private = sum(len(k.series) - k.timeline.members for k in self._kinds.values())
            return dataclasses.replace(self._stats, series=series, samples=samples, private_series=private)

    # ---- persistence -----------------------------------------------------------------------------

    def checkpoint(self) -> int:
        """Write the whole cache to ``<tsdb-path>/metriccache.ckpt`` atomically; returns bytes written
        (0 without a path). Raises ``OSError`` when the file cannot be written."""
        if self.config.tsdb_path is None:
            return 0
        with self._checkpoint_lock:
            return self._checkpoint()

    def _checkpoint(self) -> int:
        started = time.perf_counter()
        now = self._clock()
        offset = self._wall_clock() - now
        with self._lock:
            kinds = list(self._kinds.items())
            estimate = sum(
                _SERIES_META_BYTES + 16 * len(s.ring) for _m, k in kinds for s in k.series.values()
            )
        try:
            if estimate <= self.config.tsdb_max_bytes:
                # the usual case: written one series at a time, nothing of the cache copied whole
                copies = self._copies(kinds, now, offset)
                size, trimmed = persist.save_stream(self.config, now + offset, copies), 0
            else:  # over the bound: the oldest pod samples go first, which needs them all at hand
                with self._lock:
                    series = [
                        image
                        for metric, kind in kinds
                        for copier in (self._copier(metric, kind, now, offset),)
                        for s in copier.series
                        if (image := copier.copy(s)) is not None
                    ]
                size, trimmed = persist.save(self.config, Image(now + offset, series))
        except OSError:
            with self._lock:
                self._stats = dataclasses.replace(
                    self._stats, checkpoint_errors=self._stats.checkpoint_errors + 1
                )
            raise
        if trimmed:
            log.warning(
                "metric cache checkpoint over --tsdb-max-bytes=%d: left out the %d oldest samples "
                "(pod/container first)",
                self.config.tsdb_max_bytes,
                trimmed,
            )
        elapsed = time.perf_counter() - started
        with self._lock:
            st = self._stats
            self._stats = dataclasses.replace(
                st,
                checkpoints=st.checkpoints + 1,
                trimmed_samples=st.trimmed_samples + trimmed,
                checkpoint_seconds=elapsed,
                checkpoint_bytes=size,
            )
        return size

    def _copier(self, metric: str, kind: Kind, now: float, offset: float) -> persist.KindCopy:
        return persist.KindCopy(metric, kind, offset, now + offset - self.config.retention_for(metric))

    def _copies(self, kinds: list[tuple[str, Kind]], now: float, offset: float) -> Iterator[SeriesImage]:
        """Every series' checkpoint image, each copied under the lock as the writer asks for it."""
        for metric, kind in kinds:
            with self._lock:
                copier = self._copier(metric, kind, now, offset)
            for series in copier.series:
                with self._lock:
                    image = copier.copy(series)
                if image is not None:
                    yield image

    def load(self) -> int:
        """Restore a checkpoint written by any earlier run (even another boot); returns the number of
        series restored. A corrupt, truncated or foreign file is renamed ``*.corrupt`` and the cache starts
        empty with a warning; this never raises."""
        path = self.config.tsdb_path
        if path is None:
            return 0
        now = self._clock()
        offset = self._wall_clock() - now
        try:
            image = persist.read(path)
            restored, skipped = persist.from_image(image, self.config, now=now, offset=offset)
        except FileNotFoundError:
            return 0
        except (CorruptCheckpoint, OSError, ValueError, TypeError, KeyError) as err:
            # ValueError/TypeError/KeyError: a file that passed its checksum but does not make sense.
            log.warning("metric cache: cannot load %s (%s); starting empty", path / FILE_NAME, err)
            persist.move_aside(path)
            with self._lock:
                self._stats = dataclasses.replace(self._stats, load_errors=self._stats.load_errors + 1)
            return 0
        with self._lock:
            kinds: dict[str, Kind] = {}
            for (metric, key), (labels, saved_ts, saved_vs) in restored.items():
                kind = kinds[metric] = self._kind(metric)
                live = kind.series.get(key)
                ring = Ring(kind.capacity)
                if live is None:
                    ring.reset(saved_ts, saved_vs)
                else:
                    # Appends that raced ahead of the load are newer than anything on disk.
                    lts, lvs = persist.ordered(live.ring)
                    ring.reset(saved_ts + lts, saved_vs + lvs)
                    kind.forget(live)
                kind.series[key] = Series(ring, labels)
            for kind in kinds.values():
                kind.share_restored()
        if skipped:
            log.warning("metric cache: skipped %d checkpointed series that no longer fit the schema", skipped)
        log.info("metric cache: restored %d series from %s", len(restored), path / FILE_NAME)
        return len(restored)

    def run(self, stop: threading.Event) -> threading.Thread:
        """Checkpoint every ``checkpoint_interval`` (and expire idle series) until ``stop``, then once
        more; returns the started thread at once."""
        thread = threading.Thread(target=self.run_loop, args=(stop,), name="metriccache-checkpoint")
        thread.start()
        return thread

    def run_loop(self, stop: threading.Event) -> None:
        """The blocking form of :meth:`run`, for a caller that supervises its own threads.

        A young cache checkpoints early and then at doubling intervals up to ``checkpoint_interval``
        (2, 6, 14, 30, 60, 90... s with the defaults): a checkpoint costs in proportion to the history, so
        the early ones are cheap, and a SIGKILL at age ``t`` loses at most ``t / 2 + first`` seconds of
        samples and never more than ``checkpoint_interval`` (plus one checkpoint's duration).
        """
        delay = min(self.config.first_checkpoint_delay, self.config.checkpoint_interval)
        while not stop.wait(delay):
            self._tick()
            delay = min(2 * delay, self.config.checkpoint_interval)
        self._tick()

    def _tick(self) -> None:
        self.expire()
        try:
            self.checkpoint()
        except OSError as err:
            # A full or read-only volume must not stop the agent; the next tick retries, and the last
            # good file stays in place. A lasting error is logged once, its end once.
            why = err.strerror or str(err)
            if why != self._checkpoint_error:
                log.error("metric cache checkpoint failed: %s (the previous checkpoint is kept)", why)
            self._checkpoint_error = why
            return
        if self._checkpoint_error:
            log.info("metric cache checkpoint written again")
            self._checkpoint_error = ""
