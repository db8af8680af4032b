"""Bounded in-memory audit log of every change the executor makes (served at ``/events``).

Layer: ``koordlet.resourceexecutor``. Each event has a monotonically increasing ``seq`` so a reader can
poll for what is new; the oldest events fall off once ``size`` is reached.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One change: what was at ``path`` before and what was written (the exact kernel text)."""

    seq: int
    time: float
    """Wall-clock seconds since the epoch (for people; ordering is ``seq``)."""
    owner: str
    reason: str
    resource: str
    path: str
    before: str | None
    after: str
    phase: str = "final"
    """``final``, ``merge`` (the loosened first pass of a leveled update) or ``force`` (repair)."""


class AuditLog:
    """A thread-safe ring of :class:`AuditEvent`."""

    def __init__(self, size: int = 1000, *, wall_clock: Callable[[], float]) -> None:
        if size <= 0:
            raise ValueError("audit log size must be positive")
        self._events: deque[AuditEvent] = deque(maxlen=size)
        self._seq = 0
        self._wall = wall_clock
        self._lock = threading.Lock()

    def record(
        self,
        *,
        owner: str,
        reason: str,
        resource: str,
        path: str,
        before: str | None,
        after: str,
        phase: str = "final",
    ) -> AuditEvent:
        with self._lock:
            self._seq += 1
            event = AuditEvent(self._seq, self._wall(), owner, reason, resource, path, before, after, phase)
            self._events.append(event)
            return event

    def events(self, *, since_seq: int = 0, limit: int | None = None) -> list[dict[str, object]]:
        """Events with ``seq > since_seq``, oldest first, as JSON-able dicts (the newest ``limit`` ones)."""
        with self._lock:
            picked = [e for e in self._events if e.seq > since_seq]
        if limit is not None:
            picked = picked[-limit:] if limit > 0 else []
        return [asdict(e) for e in picked]

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)
