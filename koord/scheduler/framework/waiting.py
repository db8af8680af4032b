"""Pods held at Permit (kube-scheduler's ``waitingPodsMap`` and ``waitingPod``).

A pod waits while at least one Permit plugin that answered ``Wait`` has not allowed it; each such plugin
has its own deadline (capped at 15 minutes). The first rejection or expired deadline ends the wait; so
does the last allow (a timeout's message ends with the reason the plugin gave for the wait). The end is
reported once, through ``on_done(status)`` (``None``: allowed), on
the thread that ended it (the scheduling cycle of another pod, the timer, an event handler). No thread
is held while a pod waits.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Mapping

from koord.scheduler.framework.interface import Code, Status
from koord.scheduler.framework.types import Obj, PodInfo
from koordshared.apis.meta.quantity import format_duration

Done = Callable[[Status | None], None]


class WaitingPod:
    def __init__(
        self,
        info: PodInfo,
        node_name: str,
        deadlines: dict[str, float],
        on_done: Done,
        reasons: Mapping[str, str] | None = None,
        waits: Mapping[str, float] | None = None,
    ) -> None:
        self.info = info
        self._reasons = dict(reasons or {})
        self._waits = dict(waits or {})
        """Plugin -> how long it asked the pod to wait (for the timeout's message)."""
        self._node = node_name
        self._pending = dict(deadlines)
        self._on_done = on_done
        self._lock = threading.Lock()
        self._done = False

    @property
    def pod(self) -> Obj:
        return self.info.pod

    @property
    def node_name(self) -> str:
        return self._node

    def pending_plugins(self) -> list[str]:
        with self._lock:
            return sorted(self._pending)

    def allow(self, plugin: str) -> None:
        with self._lock:
            if self._done or plugin not in self._pending:
                return
            del self._pending[plugin]
            if self._pending:
                return
            self._done = True
        self._on_done(None)

    def reject(self, plugin: str, message: str) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._on_done(Status(Code.UNSCHEDULABLE, (message,), plugin))

    def expire(self, now: float) -> None:
        with self._lock:
            late = sorted(p for p, deadline in self._pending.items() if deadline <= now)
        if late:
            plugin, why = late[0], self._reasons.get(late[0])
            # kube-scheduler's words ("rejected due to timeout after waiting 10s at plugin X"), then the
            # reason the plugin gave for the wait.
            waited = f" {format_duration(self._waits[plugin])}" if plugin in self._waits else ""
            said = f": {why}" if why else ""
            self.reject(plugin, f"rejected due to timeout after waiting{waited} at plugin {plugin}{said}")

    @property
    def done(self) -> bool:
        return self._done


class WaitingPods:
    """The waiting pods by UID, and one timer thread that expires them (started on first use)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pods: dict[str, WaitingPod] = {}
        self._deadlines: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, uid: str, wp: WaitingPod, deadlines: dict[str, float]) -> None:
        with self._cond:
            self._pods[uid] = wp
            for deadline in deadlines.values():
                heapq.heappush(self._deadlines, (deadline, uid))
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="permit-timer", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, uid: str) -> None:
        with self._cond:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        with self._cond:
            return self._pods.get(uid)

    def all(self) -> list[WaitingPod]:
        with self._cond:
            return list(self._pods.values())

    def __len__(self) -> int:
        with self._cond:
            return len(self._pods)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def expire_due(self) -> None:
        """Expire every pod whose deadline has passed (the timer thread calls it; tests may too)."""
        now = self._clock()
        due: list[WaitingPod] = []
        with self._cond:
            while self._deadlines and self._deadlines[0][0] <= now:
                _, uid = heapq.heappop(self._deadlines)
                wp = self._pods.get(uid)
                if wp is not None:
                    due.append(wp)
        for wp in due:
            wp.expire(now)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                wait = self._deadlines[0][0] - self._clock() if self._deadlines else 1.0
                if wait > 0:
                    self._cond.wait(min(wait, 1.0))
                    continue
            self.expire_due()
