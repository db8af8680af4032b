"""The ``events.k8s.io/v1`` Event recorder of koord-scheduler and koord-descheduler (client-go's
``tools/events``, which kube-scheduler and the descheduler use).

An :class:`EventBroadcaster` owns the sending: a bounded queue its :meth:`~EventBroadcaster.run` thread
drains and the cache of Events sent. :meth:`EventBroadcaster.new_recorder` gives a reporting controller
(a scheduler profile's name) an :class:`EventRecorder`, whose :meth:`~EventRecorder.eventf` never
blocks: it names the Event ``<regarding name>.<nanoseconds in hex>`` in the regarding object's namespace
(``default`` for a cluster-scoped one), with ``eventTime`` now and ``reportingInstance``
``<controller>-<hostname>``; a type other than Normal or Warning is refused (logged, not sent).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import logging
import queue
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.quantity import format_micro_time, parse_time
from koordshared.kube.client import ApiError, request
from koordshared.kube.objectref import ObjectRef
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

API_VERSION = "events.k8s.io/v1"
MAX_TRIES = 12
FINISH_SECONDS = 360.0
REFRESH_SECONDS = 1800.0
RETRY_SECONDS = 10.0
MAX_QUEUED = 1000
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

Event = dict[str, Any]


def event_name(ref_name: str, unix_nano: int) -> str:
    """client-go's ``GenerateEventName``: ``<name>.<nanoseconds in hex>``, or a UUID when that is not a
    valid object name."""
    name = f"{ref_name}.{unix_nano:x}"
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return str(uuid.uuid4())
    return name


@dataclass(frozen=True, slots=True)
class _Key:
    """What makes two Events the same (the note does not)."""

    type: str
    action: str
    reason: str
    controller: str
    instance: str
    regarding: tuple[tuple[str, str], ...]
    related: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, ev: Event) -> _Key:
        return cls(
            ev["type"],
            ev["action"],
            ev["reason"],
            ev["reportingController"],
            ev["reportingInstance"],
            tuple(sorted(ev["regarding"].items())),
            tuple(sorted((ev.get("related") or {}).items())),
        )


class EventRecorder:
    """Events of one reporting controller (client-go's ``events.EventRecorder``)."""

    def __init__(self, broadcaster: EventBroadcaster, controller: str, instance: str) -> None:
        self.broadcaster = broadcaster
        self.controller = controller
        self.instance = instance

    def eventf(
        self, regarding: ObjectRef, related: ObjectRef | None, type_: str, reason: str, action: str, note: str
    ) -> None:
        """Queue an Event about ``regarding`` (``related``: a second object it involves, e.g. the
        preemptor of a preempted pod)."""
        if type_ not in ("Normal", "Warning"):
            log.error(
                "event %s on %s/%s not recorded: type %r", reason, regarding.kind, regarding.name, type_
            )
            return
        wall = self.broadcaster.wall()
        ev: Event = {
            "apiVersion": API_VERSION,
            "kind": "Event",
            "metadata": {
                "name": event_name(regarding.name, int(wall * 1e9)),
                "namespace": regarding.namespace or "default",
            },
            "eventTime": format_micro_time(wall),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "regarding": regarding.as_json(),
            "note": note,
            "type": type_,
        }
        if related is not None:
            ev["related"] = related.as_json()
        log.info("event %s %s %s/%s: %s", type_, reason, regarding.namespace or "-", regarding.name, note)
        self.broadcaster.action(ev, wall)


class EventBroadcaster:
    """Sends the Events of its recorders (client-go's ``events.EventBroadcaster`` and its sink); the
    process runs :meth:`run` on a thread of its own."""

    def __init__(
        self,
        api_client: Any,
        *,
        host: str = "",
        request_timeout: float = 5.0,
        retry_seconds: float = RETRY_SECONDS,
        max_queued: int = MAX_QUEUED,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_client = api_client
        self.host = host or socket.gethostname()
        self.request_timeout = request_timeout
        self.retry_seconds = retry_seconds
        self._clock, self.wall = clock, wall_clock
        self._queue: queue.Queue[tuple[Event, float]] = queue.Queue(max_queued)
        self._lock = threading.Lock()
        self._cache: dict[_Key, Event] = {}
        self._retries: list[tuple[float, int, Event, int]] = []  # a heap: (due, seq, event, tries)
        self._seq = itertools.count()
        self.sent = 0
        self.dropped = 0

    def new_recorder(self, controller: str) -> EventRecorder:
        """The recorder of ``controller`` (reportingInstance ``<controller>-<hostname>``)."""
        return EventRecorder(self, controller, f"{controller}-{self.host}")

    def action(self, ev: Event, wall: float) -> None:
        """Queue ``ev`` (observed at ``wall``); dropped (and counted) when the queue is full."""
        try:
            self._queue.put_nowait((ev, wall))
        except queue.Full:
            self.dropped += 1
            log.warning("event %s dropped: %d events queued", ev["reason"], self._queue.qsize())

    # ---- the sending thread ----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Send queued Events and keep the series until ``stop`` (then send what is queued)."""
        finish_at = self._clock() + FINISH_SECONDS
        refresh_at = self._clock() + REFRESH_SECONDS
        while True:
            now = self._clock()
            if now >= finish_at:
                finish_at = now + FINISH_SECONDS
                self.finish_series()
            if now >= refresh_at:
                refresh_at = now + REFRESH_SECONDS
                self.refresh_series()
            self._retry_due(now)
            try:
                ev, wall = self._queue.get(timeout=0.2)
            except queue.Empty:
                if stop.is_set():
                    return
                continue
            self._record_to_sink(ev, wall)

    def flush(self) -> None:
        """Send what is queued now and the retries that are due, on the caller's thread (tests)."""
        self._retry_due(self._clock())
        while True:
            try:
                ev, wall = self._queue.get_nowait()
            except queue.Empty:
                return
            self._record_to_sink(ev, wall)

    def _record_to_sink(self, ev: Event, wall: float) -> None:
        key = _Key.of(ev)
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                self._cache[key] = ev
                out = _copy(ev)
            else:
                observed = format_micro_time(wall)
                series = cached.get("series")
                if series is not None:  # counted here; written when the series refreshes or ends
                    series["count"] += 1
                    series["lastObservedTime"] = observed
                    return
                cached["series"] = {"count": 2, "lastObservedTime": observed}
                out = _copy(cached)
        self._attempt(out, 0)

    def _attempt(self, ev: Event, tries: int) -> None:
        _, retry = self._record(ev)
        if not retry:
            return
        tries += 1
        if tries >= MAX_TRIES:
            self.dropped += 1
            log.error("event %s on %s not recorded: retry limit exceeded", ev["reason"], _where(ev))
            return
        due = self._clock() + self.retry_seconds * (1.0 + 0.25 * random.random())  # wait.Jitter(d, 0.25)
        with self._lock:
            heapq.heappush(self._retries, (due, next(self._seq), ev, tries))

    def _retry_due(self, now: float) -> None:
        while True:
            with self._lock:
                if not self._retries or self._retries[0][0] > now:
                    return
                _, _, ev, tries = heapq.heappop(self._retries)
            self._attempt(ev, tries)

    def _record(self, ev: Event) -> tuple[Event | None, bool]:
        """Write ``ev``: a series is patched onto its Event (created again when gone), a single Event is
        created. Returns the Event the server answered and whether to try again."""
        ns, name = ev["metadata"]["namespace"], ev["metadata"]["name"]
        path = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"
        series = ev.get("series")
        try:
            written: Any = None
            if series is not None:
                try:
                    written = request(
                        self.api_client,
                        "event series patch",
                        "PATCH",
                        f"{path}/{name}",
                        body={"series": series},
                        timeout=self.request_timeout,
                        content_type="application/strategic-merge-patch+json",
                    )
                except ApiError as err:
                    if not err.not_found:
                        raise
            if written is None:
                body = _copy(ev)
                body["metadata"].pop("resourceVersion", None)
                written = request(
                    self.api_client, "event create", "POST", path, body=body, timeout=self.request_timeout
                )
        except ApiError as err:
            if err.status == 0:
                return None, True
            # An Event of a series created meanwhile (it was emitted twice at once): patch it next time.
            if series is not None and err.status == 409 and err.reason == "AlreadyExists":
                return None, True
            self.dropped += 1
            log.info("event %s on %s refused: %s", ev["reason"], _where(ev), str(err))
            return None, False
        except APIUnavailable as err:
            log.info("event %s on %s not written (will retry): %s", ev["reason"], _where(ev), str(err))
            return None, True
        self.sent += 1
        return (written if isinstance(written, dict) else None), False

    # ---- series ----------------------------------------------------------------------------------

    def finish_series(self) -> None:
        """Write the final count of each series not observed for 6 minutes and forget it; forget single
        Events 6 minutes old (the next one starts afresh)."""
        limit = self.wall() - FINISH_SECONDS
        with self._lock:
            cached = list(self._cache.items())
        for key, ev in cached:
            series = ev.get("series")
            if series is None:
                if (parse_time(ev["eventTime"]) or 0.0) < limit:
                    self._forget(key, ev)
                continue
            if (parse_time(series["lastObservedTime"]) or 0.0) < limit:
                _, retry = self._record(copy.deepcopy(ev))
                if not retry:
                    self._forget(key, ev)

    def refresh_series(self) -> None:
        """Write every series still going (its count so far)."""
        with self._lock:
            cached = [(k, copy.deepcopy(ev)) for k, ev in self._cache.items() if ev.get("series") is not None]
        for key, ev in cached:
            written, retry = self._record(ev)
            if not retry and written is not None:
                with self._lock:
                    if key in self._cache:
                        written["series"] = self._cache[key]["series"]  # counted meanwhile: keep those
                        self._cache[key] = written

    def _forget(self, key: _Key, ev: Event) -> None:
        with self._lock:
            if self._cache.get(key) is ev:
                del self._cache[key]


def _copy(ev: Event) -> Event:
    """A copy of an Event whose objects one level down (metadata, regarding, related, series: what the
    sender changes) are its own; the sender never changes anything deeper, so the rest is shared
    (``copy.deepcopy``, once or twice per Event, was a visible share of a scheduler's CPU per pod)."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in ev.items()}


def _where(ev: Event) -> str:
    ref = ev.get("regarding") or {}
    return f"{ref.get('kind', '')} {ref.get('namespace') or '-'}/{ref.get('name', '')}"
