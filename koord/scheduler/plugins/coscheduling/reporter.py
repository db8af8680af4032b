"""Tells users what Koordinator leaves them guessing (its gated gang pods sit Pending without a word):

- a gang pod held out of the active queue (its gang lacks pods, or is undefined) gets, once it has been
  held for :data:`GRACE` seconds (pods of a job are usually created within that), a ``FailedScheduling``
  Event and the ``PodScheduled=False`` condition with the reason, refreshed at most every
  :data:`REFRESH` seconds while the reason changes;
- a gang whose annotations (or PodGroup) fell back to defaults gets a ``InvalidGangSpec`` Warning Event
  on each pod that joins it (on the PodGroup for a PodGroup's own values), saying which value and why.

Members that went through a scheduling cycle are reported by the scheduler itself, with the messages of
:mod:`.messages`. Runs as a controller: writes only while koord-scheduler leads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from koord.scheduler.framework import SchedulerHandle
from koord.scheduler.plugins.coscheduling.gang import Obj
from koord.scheduler.plugins.coscheduling.keyed import KeyedController
from koordshared.apis.core.pod import pod_key

GRACE = 2.0
REFRESH = 30.0
INVALID_GANG = "InvalidGangSpec"
GANG_TIMEOUT = "GangTimeout"
"""The reason of the Event telling what became of the gang when a member's wait at Permit ran out: apart
from the framework's FailedScheduling for the same pod, which an Event of the same reason just before
would have absorbed into its series."""


class GangReporter(KeyedController):
    name = "GangReporter"

    def __init__(self, handle: SchedulerHandle, reason: Callable[[Obj], str]) -> None:
        super().__init__(handle.now)
        self.handle = handle
        self._reason = reason
        self._gated: dict[str, float] = {}
        """Pod key -> when it was first seen held back."""
        self._reported: dict[str, tuple[str, float]] = {}
        self._problems: dict[str, tuple[Obj, str, tuple[str, ...]]] = {}
        self._told: dict[str, tuple[str, ...]] = {}

    def gated(self, pod: Obj) -> None:
        """The queue holds ``pod`` back (called at each PreEnqueue that gates it: cheap when known)."""
        key = pod_key(pod)
        with self._lock:
            if key in self._gated:
                return
            self._gated[key] = self.handle.now()
        self.enqueue(f"gated/{key}")

    def problems(self, kind: str, obj: Obj | None, gang: str, problems: Sequence[str]) -> None:
        """Tell ``obj`` (a ``pod`` that joined the gang, or its PodGroup: ``kind``) what fell back."""
        if obj is None:
            return
        key = f"problems/{kind}/{pod_key(obj)}"
        with self._lock:
            if self._told.get(key) == tuple(problems):
                return
            self._problems[key] = (obj, gang, tuple(problems))
        self.enqueue(key)

    def forget(self, pod: Obj) -> None:
        key = pod_key(pod)
        with self._lock:
            self._gated.pop(key, None)
            self._reported.pop(key, None)
            self._told.pop(f"problems/pod/{key}", None)

    def reconcile(self, key: str) -> float | None:
        kind, _, rest = key.partition("/")
        if kind == "problems":
            self._tell_problems(key)
            return None
        return self._report_gated(rest)

    def _tell_problems(self, key: str) -> None:
        with self._lock:
            entry = self._problems.pop(key, None)
        if entry is None:
            return
        obj, gang, problems = entry
        self.handle.event(obj, "Warning", INVALID_GANG, f"gang {gang}: " + "; ".join(problems))
        with self._lock:
            self._told[key] = problems

    def _report_gated(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        pod = self.handle.get_pod(namespace, name)
        why = self._reason(pod) if pod is not None and not (pod.get("spec") or {}).get("nodeName") else ""
        now = self.handle.now()
        with self._lock:
            first = self._gated.get(key)
            if first is None or not why:
                self._gated.pop(key, None)
                return None
            if now - first < GRACE:
                return GRACE - (now - first)
            last = self._reported.get(key)
            if last is not None and (last[0] == why or now - last[1] < REFRESH):
                return REFRESH if last[0] == why else REFRESH - (now - last[1])
            self._reported[key] = (why, now)
        assert pod is not None
        self.handle.event(pod, "Warning", "FailedScheduling", why)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}
        st = self.handle.update_pod_status(pod, condition, None)
        if st is not None:
            with self._lock:
                self._reported.pop(key, None)
            raise RuntimeError(f"status of {key}: {st.message}")
        return REFRESH
