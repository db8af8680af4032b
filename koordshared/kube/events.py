"""The core ``v1`` Event recorder (client-go's ``record.EventRecorder``, kept small): koord-manager's, as
controller-runtime's recorder is Koordinator's (kube-scheduler and the descheduler write
``events.k8s.io/v1`` Events: :mod:`koordshared.kube.eventsv1`). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.quantity import format_time
from koordshared.kube.client import ApiError, request
from koordshared.kube.objectref import ObjectRef
from koordshared.kube.ratelimit import TokenBucket
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

AGGREGATE_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class _Pending:
    ref: ObjectRef
    type: str
    reason: str
    message: str
    wall: float


class EventRecorder:
    def __init__(
        self,
        api_client: Any,
        component: str,
        *,
        host: str = "",
        request_timeout: float = 5.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
        max_queued: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_client = api_client
        self.component = component
        self.host = host or socket.gethostname()
        self.request_timeout = request_timeout
        self._burst, self._refill = burst, refill_seconds
        self._clock, self._wall = clock, wall_clock
        self._queue: queue.Queue[_Pending | None] = queue.Queue(max_queued)
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._recent: dict[tuple[Any, ...], tuple[str, int, float, str]] = {}
        self.sent = 0
        self.dropped = 0

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue an Event (``Normal``/``Warning``) about ``ref``; dropped (and counted) when rate-limited
        or when the queue is full."""
        key = (ref.kind, ref.namespace, ref.name)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(1.0 / self._refill, self._burst, self._clock)
        if not bucket.allow():
            self.dropped += 1
            return
        log.info("event %s %s %s/%s: %s", type_, reason, ref.namespace or "-", ref.name, message)
        try:
            self._queue.put_nowait(_Pending(ref, type_, reason, message[:1024], self._wall()))
        except queue.Full:
            self.dropped += 1

    def run(self, stop: threading.Event) -> None:
        """Send queued events until ``stop`` (then flush what is queued, best effort)."""
        while True:
            try:
                item = self._queue.get(timeout=0.2)
            except queue.Empty:
                if stop.is_set():
                    return
                continue
            if item is not None:
                self._send(item)

    def flush(self) -> None:
        """Send what is queued now, on the caller's thread (tests, shutdown)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._send(item)

    def _send(self, ev: _Pending) -> None:
        ns = ev.ref.namespace or "default"
        ts = format_time(ev.wall)
        agg_key = (dataclasses.replace(ev.ref, resource_version=""), ev.type, ev.reason, ev.message)
        recent = self._recent.get(agg_key)
        try:
            if recent is not None and ev.wall - recent[2] < AGGREGATE_SECONDS:
                name, count, first_wall, _ = recent
                patch = {"count": count + 1, "lastTimestamp": ts}
                request(
                    self.api_client,
                    "event patch",
                    "PATCH",
                    f"/api/v1/namespaces/{ns}/events/{name}",
                    body=patch,
                    timeout=self.request_timeout,
                    content_type="application/merge-patch+json",
                )
                self._recent[agg_key] = (name, count + 1, first_wall, ts)
            else:
                name = f"{ev.ref.name}.{time.time_ns():x}"
                body = {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": ns},
                    "involvedObject": ev.ref.as_json(),
                    "type": ev.type,
                    "reason": ev.reason,
                    "message": ev.message,
                    "source": {"component": self.component, "host": self.host},
                    "firstTimestamp": ts,
                    "lastTimestamp": ts,
                    "count": 1,
                    "reportingComponent": self.component,
                    "reportingInstance": self.host,
                }
                request(
                    self.api_client,
                    "event create",
                    "POST",
                    f"/api/v1/namespaces/{ns}/events",
                    body=body,
                    timeout=self.request_timeout,
                )
                self._recent[agg_key] = (name, 1, ev.wall, ts)
            self.sent += 1
        except (ApiError, APIUnavailable) as err:
            self._recent.pop(agg_key, None)  # the aggregate may be gone (404): start a new Event next time
            log.info("event %s on %s/%s not recorded: %s", ev.reason, ns, ev.ref.name, str(err))
