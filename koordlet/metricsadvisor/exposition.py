"""``/metrics`` rendered ahead of scrapes and served as bytes (plain or gzip) to every scraper.

Layer: ``koordlet.metricsadvisor``. Rendering the whole registry at scrape time cost 55-130 ms of GIL at
1000 pods, paid again by every concurrent scraper, and each of those milliseconds delayed the samplers
(``docs/reliability.md``, F20). :class:`Exposition` renders after a pod sweep (``collected()`` wakes its
thread) and keeps the bytes; a scrape only copies them out. Its gzip form is built at most once per
payload, by the first scrape that asks for it (zlib runs without the GIL). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from koordshared.runtime.httpserver import Rendered

log = logging.getLogger(__name__)

_go_float = cast(
    Callable[[float], str], floatToGoString
)  # untyped upstream; the same text as generate_latest

SCRAPE_GAPS = 8
"""Gaps between scrapes remembered to estimate the scrape period (the shortest of them)."""

RUN_WAKE_SECONDS = 30.0
"""The render thread's longest sleep when nothing wakes it (a safety net: :meth:`Exposition.close` does)."""

GZIP_LEVEL = 1
"""Level 1 compresses the exposition's repetitive text ~10x at a fraction of level 6's cost."""


def _escape_value(v: str) -> str:
    # the text format's label-value escaping (backslash, newline, double quote), as prometheus_client does
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _help(doc: str) -> str:
    return doc.replace("\\", r"\\").replace("\n", r"\n")


class RowFamily(GaugeMetricFamily):
    """A gauge family holding ``(label values, value)`` rows; ``samples`` is built only when read.

    Drop-in for ``GaugeMetricFamily`` (``add_metric`` with positional label values): ``registry.collect``
    consumers and ``generate_latest`` see the same samples, while :class:`Exposition` renders the rows.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.rows: list[tuple[tuple[str, ...], float]] = []
        super().__init__(name, documentation, labels=labels)
        self.label_names: tuple[str, ...] = tuple(labels)

    @property
    def samples(self) -> list[Sample]:
        names = self.label_names
        return [
            Sample(self.name, dict(zip(names, values, strict=True)), value, None)
            for values, value in self.rows
        ]

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        if value:  # Metric.__init__ sets [] here; rows are the only storage
            raise TypeError("RowFamily takes rows through add_metric")

    def add_metric(self, labels: Sequence[str], value: float, timestamp: Any = None) -> None:
        if timestamp is not None:
            raise ValueError("RowFamily has no timestamps")
        if len(labels) != len(self.label_names):
            raise ValueError(f"{self.name}: {len(labels)} label values for {len(self.label_names)} labels")
        self.rows.append((tuple(labels), value))


class _One:
    """One family as a collector, to format it with ``generate_latest``."""

    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self._metric


class Renderer:
    """Text exposition of a registry; remembers each row's line between calls and formats again only the
    rows that are new or whose value changed (most pods' memory, and an idle pod's CPU, stay the same
    from one scrape to the next). Not thread-safe."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, tuple[str, ...]], tuple[float, str, str]] = {}
        """(family, label values) -> (value, prefix, the whole line)."""

    def render(self, families: Iterable[Metric]) -> bytes:
        old: dict[tuple[str, tuple[str, ...]], tuple[float, str, str]] = self._lines
        new: dict[tuple[str, tuple[str, ...]], tuple[float, str, str]] = {}
        out: list[str] = []
        for fam in families:
            if not isinstance(fam, RowFamily):
                out.append(generate_latest(_One(fam)).decode("utf-8"))
                continue
            name = fam.name
            out.append(f"# HELP {name} {_help(fam.documentation)}\n# TYPE {name} gauge\n")
            order: list[int] | None = None
            for values, value in fam.rows:
                key = (name, values)
                got = old.get(key)
                if got is not None:
                    last = got[0]
                    # NaN never equals itself (formatted again, harmlessly); 0.0 and -0.0 print apart
                    if last == value and (value or math.copysign(1.0, value) == math.copysign(1.0, last)):
                        new[key] = got
                        out.append(got[2])
                        continue
                    prefix = got[1]
                else:
                    if order is None:
                        order = sorted(range(len(fam.label_names)), key=fam.label_names.__getitem__)
                    labels = ",".join(f'{fam.label_names[i]}="{_escape_value(values[i])}"' for i in order)
                    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
                line = prefix + _go_float(value) + "\n"
                new[key] = (value, prefix, line)
                out.append(line)
        self._lines = new
        return "".join(out).encode("utf-8")


class Payload:
    """One rendered exposition: its bytes, when it was rendered, the number of collections it shows,
    and its gzip form once asked for."""

    def __init__(self, body: bytes, rendered_at: float, collections: int) -> None:
        self.body = body
        self.rendered_at = rendered_at
        self.collections = collections
        self._gzip: bytes | None = None
        self._lock = threading.Lock()

    def identity(self) -> bytes:
        return self.body

    def gzip(self) -> bytes:
        with self._lock:  # concurrent gzip scrapers share one compression
            if self._gzip is None:
                self._gzip = gzip.compress(self.body, GZIP_LEVEL, mtime=0)
            return self._gzip


class Exposition:
    """The agent's ``/metrics`` payload, rendered after each collection and served as bytes."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        interval: float = 1.0,
        max_staleness: float = 10.0,
        idle_after: float = 180.0,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.registry = registry
        self.interval = interval
        self.max_staleness = max_staleness
        self.idle_after = idle_after
        self._clock = clock
        self._last_scrape: float | None = None
        self._gaps: deque[float] = deque(maxlen=SCRAPE_GAPS)
        self._scrape_lock = threading.Lock()
        self._collections = 0  # collections finished; a payload showing fewer is behind
        self._on_error = on_error
        self._renderer = Renderer()
        self._render_lock = threading.Lock()
        self._due = threading.Event()
        self._payload: Payload | None = None
        self._closed = False
        self._failing = ""
        self.renders = 0

    def collected(self) -> None:
        """A collection finished: render at the next chance (called from the collector's thread). Until
        then a scrape renders in place rather than serve the payload from before it."""
        self._collections += 1  # one writer (the pod sweep's thread); readers compare, never write
        if self.render_due():  # the render thread sleeps through collections nobody will fetch
            self._due.set()

    def render(self) -> Payload:
        """Render the registry now; on failure keep (and return) the last good payload."""
        with self._render_lock:
            return self._render_locked()

    def _render_locked(self) -> Payload:
        # Counted before collecting: a collection finishing mid-render leaves this payload behind.
        collections = self._collections
        try:
            body = self._renderer.render(self.registry.collect())
        except Exception as err:
            if repr(err) != self._failing:  # a broken collector fails every second: log once per change
                self._failing = repr(err)
                log.exception("rendering /metrics failed; serving the previous payload")
            if self._on_error is not None:
                self._on_error(err)
            if self._payload is None:
                raise
            return self._payload
        if self._failing:
            log.info("rendering /metrics works again")
            self._failing = ""
        self._payload = Payload(body, self._clock(), collections)
        self.renders += 1
        return self._payload

    def _fresh(self) -> Payload | None:
        got = self._payload
        if (
            got is not None
            and got.collections == self._collections
            and self._clock() - got.rendered_at <= self.max_staleness
        ):
            return got
        return None

    def render_due(self) -> bool:
        """Whether the collection just made should be rendered: a scrape is expected before the next
        collection, and one came within ``idle_after``. Until two scrapes give a period nothing is
        rendered ahead (the second renders in place): rendering every collection meanwhile cost an idle
        agent a render a second for a whole scrape period after its first scrape."""
        with self._scrape_lock:
            last = self._last_scrape
            period = min(self._gaps) if self._gaps else None
        if last is None:
            return False
        now = self._clock()
        if now - last > self.idle_after:
            return False
        return period is not None and now + self.interval >= last + period

    def payload(self) -> Payload:
        """What a scrape serves: the last payload, or a fresh one if there is none, it is too old, or a
        collection finished after it was rendered."""
        now = self._clock()
        with self._scrape_lock:
            if self._last_scrape is not None and now > self._last_scrape:
                self._gaps.append(now - self._last_scrape)
            self._last_scrape = now
        got = self._fresh()
        if got is not None:
            return got
        with self._render_lock:  # one scraper renders; the others then find its payload
            return self._fresh() or self._render_locked()

    def route(self, _query: object) -> Rendered:
        """The ``/metrics`` route of the agent's HTTP server, which sends gzip to clients that accept it.
        The gzip form is made by the first scrape of each payload (Prometheus always asks for it)."""
        payload = self.payload()
        return Rendered(200, CONTENT_TYPE_LATEST, payload.identity(), payload.gzip())

    def close(self) -> None:
        """End :meth:`run` now (it otherwise notices ``stop`` within :data:`RUN_WAKE_SECONDS`)."""
        self._closed = True
        self._due.set()

    def run(self, stop: threading.Event) -> None:
        """Render the collections a scrape is due for (:meth:`collected` wakes this thread for those
        only; a scrape finding one unrendered renders in place) until :meth:`close` or ``stop``. Waking
        for every collection, and every two intervals to look at ``stop``, was two of an idle agent's
        twenty wake-ups a second, and a timed wake-up costs ~0.1 ms of CPU on a VM."""
        while not stop.is_set():
            self._due.wait(RUN_WAKE_SECONDS)
            if stop.is_set() or self._closed:
                return
            self._due.clear()
            if not self.render_due() or self._fresh() is not None:  # a scrape may have rendered it
                continue
            with contextlib.suppress(Exception):  # logged and counted in render(); the next one retries
                self.render()
