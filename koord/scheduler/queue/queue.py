"""The scheduling queue (kube-scheduler's ``PriorityQueue``): pending pods in three places.

- **activeQ**: pods to try now, ordered by the profile's QueueSort plugin (PrioritySort: priority, then
  the time the pod entered the queue).
- **backoffQ**: pods that failed, until their backoff expires (``podInitialBackoffSeconds`` doubling per
  attempt up to ``podMaxBackoffSeconds``: 1 s to 10 s by default, counted from the last failure); an idle
  loop takes them early, but for error backoffs (kube-scheduler's ``SchedulerPopFromBackoffQ``).
- **unschedulable pods**: pods every node rejected, and pods a PreEnqueue plugin gates. They leave on a
  cluster event that one of the plugins that rejected them registered and whose queueing hint says
  ``Queue`` (any event for a pod no plugin claimed), or after 5 minutes (the unschedulable timeout,
  checked every 30 s); a gated pod, when its gating plugin lets it through. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koord.scheduler.framework.events import (
    FORCE_ACTIVATE,
    QUEUE,
    UNSCHEDULABLE_TIMEOUT,
    ClusterEvent,
    ClusterEventWithHint,
)
from koord.scheduler.framework.interface import Status
from koord.scheduler.framework.types import Obj, PodInfo
from koord.scheduler.queue.podinfo import QueuedPodInfo

Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
PreEnqueue = Callable[[Obj], Status | None]
Hints = Callable[[Obj], Mapping[str, tuple[ClusterEventWithHint, ...]]]
"""The profile of a pod -> each plugin's registered events."""

UNSCHEDULABLE_TIMEOUT_SECONDS = 300.0
FLUSH_UNSCHEDULABLE_EVERY = 30.0
MAX_IN_FLIGHT_EVENTS = 256
"""Events kept per pod under scheduling; past this the pod is simply requeued after its attempt."""
BACKOFF_ORDERING_WINDOW = 1.0
"""Seconds of backoff expiry within which backoffQ orders pods as activeQ does, for the pops of an idle
loop (kube-scheduler's ``backoffQOrderingWindowDuration``)."""


class _Entry:
    __slots__ = ("less", "qpi", "seq", "window")

    def __init__(self, qpi: QueuedPodInfo, less: Less, seq: int, window: float = 0.0) -> None:
        self.qpi, self.less, self.seq, self.window = qpi, less, seq, window

    def __lt__(self, other: _Entry) -> bool:
        if self.window != other.window:
            return self.window < other.window
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.seq < other.seq


class SchedulingQueue:
    def __init__(
        self,
        less: Less,
        pre_enqueue: PreEnqueue,
        hints: Hints,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        pop_from_backoff: bool = True,
    ) -> None:
        self._less = less
        self._pre_enqueue = pre_enqueue
        self._hints = hints
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self.pop_from_backoff = pop_from_backoff
        """An idle loop takes backing-off pods early (kube-scheduler's feature gate of that name, on by
        default since 1.33)."""
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._active: list[_Entry] = []
        self._backoff: list[tuple[float, int, str]] = []
        """Every backing-off pod by expiry (the flush to activeQ)."""
        self._backoff_early: list[_Entry] = []
        """The backing-off pods an idle loop may take early (not error backoffs), by window and order."""
        self._backoff_seq: dict[str, int] = {}
        """UID -> the sequence number of its current backoff entries (older entries are stale)."""
        self._where: dict[str, str] = {}
        """UID -> "active" | "backoff" | "unschedulable" | "gated"."""
        self._parked: dict[str, None] = {}
        """The UIDs of the unschedulable and gated pods, in the order they were parked: the only pods a
        cluster event can move, so an event costs what they number, not what the queue holds
        (kube-scheduler walks its ``unschedulablePods`` alone)."""
        self._pods: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, list[tuple[ClusterEvent, Any, Any]] | None] = {}
        self._updated: dict[str, Obj] = {}
        """UID -> the newest object of a pod updated while in flight (its attempt used an older one)."""
        self.scheduling_cycle = 0
        self._closed = False

    # ---- adding ---------------------------------------------------------------------------------

    def add(self, pod: Obj) -> None:
        """A new pending pod (its PreEnqueue plugins decide between activeQ and gated)."""
        qpi = QueuedPodInfo(PodInfo(pod), self._clock())
        with self._cond:
            if qpi.uid in self._pods or qpi.uid in self._in_flight:
                return
            self._place_new(qpi)

    def _place_new(self, qpi: QueuedPodInfo) -> None:
        gate = self._pre_enqueue(qpi.pod)
        self._pods[qpi.uid] = qpi
        if gate is not None:
            qpi.gating_plugin = gate.plugin
            qpi.gate_message = gate.message
            self._park(qpi.uid, "gated")
            return
        qpi.gating_plugin = ""
        self._push_active(qpi)

    def _park(self, uid: str, where: str) -> None:
        self._where[uid] = where
        self._parked[uid] = None

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        self._where[qpi.uid] = "active"
        self._parked.pop(qpi.uid, None)
        heapq.heappush(self._active, _Entry(qpi, self._less, next(self._seq)))
        self._cond.notify()

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        expiry = qpi.last_failure + self.backoff_duration(qpi)
        if expiry <= self._clock():
            self._push_active(qpi)
            return
        self._where[qpi.uid] = "backoff"
        self._parked.pop(qpi.uid, None)
        seq = self._backoff_seq[qpi.uid] = next(self._seq)
        heapq.heappush(self._backoff, (expiry, seq, qpi.uid))
        # A pod whose early attempt failed waits its backoff out before it may go early again: without
        # this, pods that free room for one another and fail in turn (a gang with room for all but one
        # member) would retry without pause on an idle scheduler.
        if self.pop_from_backoff and not _error_backoff(qpi) and not qpi.early:
            window = expiry // BACKOFF_ORDERING_WINDOW
            heapq.heappush(self._backoff_early, _Entry(qpi, self._less, seq, window))
        self._cond.notify()

    def _backing_off(self, uid: str, seq: int) -> bool:
        """Whether a backoff entry is current: the pod still backs off, since that entry was made."""
        return self._where.get(uid) == "backoff" and self._backoff_seq.get(uid) == seq

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """``initial * 2^(attempts-1)``, capped at the maximum (``calculateBackoffDuration``)."""
        if qpi.attempts <= 0:
            return 0.0
        return float(min(self.initial_backoff * 2 ** min(qpi.attempts - 1, 30), self.max_backoff))

    # ---- the scheduling loop's side -------------------------------------------------------------

    def pop(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """The next pod to schedule: activeQ's head, else the next of backoffQ that backs off after a
        rejection (blocks while there is none; ``None`` on timeout or close)."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                self._flush_backoff_locked()
                while self._active:
                    entry = heapq.heappop(self._active)
                    qpi = entry.qpi
                    if self._where.get(qpi.uid) != "active" or self._pods.get(qpi.uid) is not qpi:
                        continue  # stale entry: the pod moved or left
                    qpi.early = False
                    return self._start(qpi)
                while self._backoff_early and not self._closed:
                    entry = heapq.heappop(self._backoff_early)
                    if (
                        self._backing_off(entry.qpi.uid, entry.seq)
                        and self._pods.get(entry.qpi.uid) is entry.qpi
                    ):
                        entry.qpi.early = True
                        return self._start(entry.qpi)
                if self._closed:
                    return None
                wait = 1.0 if not self._backoff else max(self._backoff[0][0] - self._clock(), 0.001)
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = min(wait, left)
                self._cond.wait(wait)

    def _start(self, qpi: QueuedPodInfo) -> QueuedPodInfo:
        """``qpi`` leaves the queue for a scheduling attempt (hold the lock)."""
        del self._where[qpi.uid]
        self._parked.pop(qpi.uid, None)
        del self._pods[qpi.uid]
        self._backoff_seq.pop(qpi.uid, None)
        self.scheduling_cycle += 1
        qpi.attempts += 1
        qpi.popped_cycle = self.scheduling_cycle
        if qpi.initial_attempt is None:
            qpi.initial_attempt = self._clock()
        self._in_flight[qpi.uid] = []
        return qpi

    def take(self, uid: str, plugin: str) -> QueuedPodInfo | None:
        """This pod for a scheduling attempt now, wherever it waits in the queue (Koordinator's NextPod,
        for ``plugin``); ``None`` when the queue does not hold it, or a PreEnqueue plugin other than
        ``plugin`` gates it."""
        with self._cond:
            qpi = self._pods.get(uid)
            where = self._where.get(uid)
            if qpi is None or where is None:
                return None
            if where == "gated":
                gate = self._pre_enqueue(qpi.pod)
                if gate is not None and gate.plugin != plugin:
                    qpi.gating_plugin, qpi.gate_message = gate.plugin, gate.message
                    return None
                qpi.gating_plugin = ""
            return self._start(qpi)

    def done(self, uid: str) -> None:
        """The pod's scheduling attempt is over (it was assumed, or handed back)."""
        with self._cond:
            self._in_flight.pop(uid, None)
            self._updated.pop(uid, None)

    def add_unschedulable(self, qpi: QueuedPodInfo) -> None:
        """A failed attempt comes back: to backoffQ when an event seen during the attempt (or no
        plugin claimed the failure and an event arrived) may help it, else to the unschedulable pods;
        a pod that failed with an error goes to backoffQ."""
        with self._cond:
            events = self._in_flight.pop(qpi.uid, [])
            newer = self._updated.pop(qpi.uid, None)
            if qpi.uid in self._pods or self._closed:
                return
            qpi.last_failure = self._clock()
            self._pods[qpi.uid] = qpi
            if newer is not None:
                # kube-scheduler requeues a failed pod as the informer has it now, not as its attempt saw
                # it: a pod whose spec or labels changed meanwhile may fit now.
                tried, qpi.info = qpi.pod, PodInfo(newer)
                if _spec_changed(tried, newer):
                    self._push_backoff(qpi)
                    return
            if qpi.error or events is None:
                self._push_backoff(qpi)
                return
            for event, old, new in events:
                verdict = self._worth_requeue(qpi, event, old, new)
                if verdict is not None:
                    self._requeue(qpi, verdict)
                    return
            self._park(qpi.uid, "unschedulable")

    def _worth_requeue(self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> str | None:
        """``"active"``/``"backoff"`` when ``event`` may make the pod schedulable, else ``None``."""
        if event in (UNSCHEDULABLE_TIMEOUT, FORCE_ACTIVATE):
            return "backoff"
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors:
            return "backoff"
        registered = self._hints(qpi.pod)
        for plugin in sorted(rejectors):
            for reg in registered.get(plugin, ()):
                if not reg.event.matches(event):
                    continue
                try:
                    hint = QUEUE if reg.hint is None else reg.hint(qpi.pod, old, new)
                except Exception:
                    hint = QUEUE  # a hint that fails counts as Queue, as in kube-scheduler
                if hint is QUEUE:
                    return "active" if plugin in qpi.pending_plugins else "backoff"
        return None

    def _requeue(self, qpi: QueuedPodInfo, where: str) -> None:
        if where == "active":
            self._push_active(qpi)
        else:
            self._push_backoff(qpi)

    # ---- cluster events -------------------------------------------------------------------------

    def on_event(self, event: ClusterEvent, old: Any = None, new: Any = None) -> int:
        """A cluster change: unschedulable pods its hints say may now fit are requeued; gated pods
        are re-checked; pods being scheduled keep the event for their attempt. Returns how many moved."""
        moved = 0
        with self._cond:
            for uid, kept in self._in_flight.items():
                if kept is not None:
                    kept.append((event, old, new))
                    if len(kept) > MAX_IN_FLIGHT_EVENTS:
                        self._in_flight[uid] = None
            for uid in list(self._parked):
                qpi, where = self._pods[uid], self._where[uid]
                if where == "gated":
                    if self._pre_enqueue(qpi.pod) is None:
                        qpi.gating_plugin = ""
                        self._push_active(qpi)
                        moved += 1
                elif where == "unschedulable":
                    verdict = self._worth_requeue(qpi, event, old, new)
                    if verdict is not None:
                        self._requeue(qpi, verdict)
                        moved += 1
        return moved

    def update(self, old: Obj, new: Obj) -> None:
        """A queued pod changed: keep its place and attempts, with the new object. A pod being scheduled
        keeps its newest object for its return to the queue, should its attempt fail."""
        info = PodInfo(new)
        with self._cond:
            qpi = self._pods.get(info.uid)
            if qpi is None:
                if info.uid in self._in_flight:
                    self._updated[info.uid] = new
                else:
                    self._place_new(QueuedPodInfo(info, self._clock()))
                return
            qpi.info = info
            where = self._where.get(info.uid)
            if where == "gated":
                if self._pre_enqueue(new) is None:
                    qpi.gating_plugin = ""
                    self._push_active(qpi)
            elif where == "active":
                self._push_active(qpi)  # re-sorted; the old heap entry is skipped as stale
            elif where == "unschedulable" and _spec_changed(old, new):
                self._push_backoff(qpi)

    def delete(self, pod: Obj) -> None:
        uid = PodInfo(pod).uid
        with self._cond:
            self._pods.pop(uid, None)
            self._where.pop(uid, None)
            self._parked.pop(uid, None)
            self._backoff_seq.pop(uid, None)
            self._in_flight.pop(uid, None)
            self._updated.pop(uid, None)

    def activate(self, uids: Iterable[str]) -> None:
        """Move these pods to activeQ whatever their backoff (Koordinator's gangs use it); a gated one
        when its PreEnqueue plugins now let it through (kube-scheduler's ``Activate``)."""
        with self._cond:
            for uid in uids:
                qpi = self._pods.get(uid)
                where = self._where.get(uid)
                if qpi is None:
                    continue
                if where in ("backoff", "unschedulable"):
                    self._push_active(qpi)
                elif where == "gated" and self._pre_enqueue(qpi.pod) is None:
                    qpi.gating_plugin = ""
                    self._push_active(qpi)

    # ---- housekeeping ---------------------------------------------------------------------------

    def _flush_backoff_locked(self) -> None:
        now = self._clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, uid = heapq.heappop(self._backoff)
            qpi = self._pods.get(uid)
            if qpi is not None and self._backing_off(uid, seq):
                del self._backoff_seq[uid]
                self._push_active(qpi)

    def flush_unschedulable(self) -> int:
        """Requeue pods unschedulable for longer than the timeout (5 minutes)."""
        now = self._clock()
        moved = 0
        with self._cond:
            for uid in list(self._parked):
                qpi, where = self._pods[uid], self._where[uid]
                if where == "unschedulable" and now - qpi.last_failure > UNSCHEDULABLE_TIMEOUT_SECONDS:
                    self._push_backoff(qpi)
                    moved += 1
        return moved

    def run(self, stop: threading.Event) -> None:
        """The unschedulable-pods flush, every 30 s until ``stop``."""
        while not stop.wait(FLUSH_UNSCHEDULABLE_EVERY):
            self.flush_unschedulable()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def counts(self) -> dict[str, int]:
        """Pods per place: ``active``, ``backoff``, ``unschedulable``, ``gated``
        (``scheduler_pending_pods{queue}``)."""
        with self._cond:
            self._flush_backoff_locked()
            out = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
            for where in self._where.values():
                out[where] += 1
            return out

    def unschedulable_by_plugin(self, profile_of: Callable[[Any], str]) -> dict[tuple[str, str], int]:
        """``(plugin, profile) -> pods`` held as unschedulable that the plugin rejected
        (``scheduler_unschedulable_pods``)."""
        out: dict[tuple[str, str], int] = {}
        with self._cond:
            for uid in self._parked:
                qpi = self._pods.get(uid) if self._where[uid] == "unschedulable" else None
                if qpi is None:
                    continue
                profile = profile_of(qpi.pod)
                for plugin in qpi.unschedulable_plugins | qpi.pending_plugins:
                    out[(plugin, profile)] = out.get((plugin, profile), 0) + 1
        return out

    def where(self, uid: str) -> str | None:
        with self._cond:
            return self._where.get(uid) or ("in-flight" if uid in self._in_flight else None)

    def get(self, uid: str) -> QueuedPodInfo | None:
        with self._cond:
            return self._pods.get(uid)


def _error_backoff(qpi: QueuedPodInfo) -> bool:
    """A pod backing off after an error, not a rejection: no plugin rejected it (kube-scheduler keeps these
    in ``podErrorBackoffQ``, which an idle loop never pops early)."""
    return qpi.error or not (qpi.unschedulable_plugins or qpi.pending_plugins)


def _spec_changed(old: Obj, new: Obj) -> bool:
    """A change that may make a rejected pod fit (its spec or labels), not only its status."""
    return old.get("spec") != new.get("spec") or (old.get("metadata") or {}).get("labels") != (
        new.get("metadata") or {}
    ).get("labels")
