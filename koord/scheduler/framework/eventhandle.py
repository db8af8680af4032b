"""What koord-scheduler's handle offers a plugin to tell users something: an Event, as kube-scheduler's
``EventRecorder().Eventf(regarding, related, type, reason, action, note)`` writes it. Part of
:class:`~koord.scheduler.framework.interface.SchedulerHandle`.
"""

from __future__ import annotations

from typing import Protocol

from koord.scheduler.framework.types import Obj

SCHEDULING = "Scheduling"
"""The action of an Event about scheduling a pod (kube-scheduler's FailedScheduling); Binding is the
Scheduled Event's, Preempting the Preempted one's."""


class EventHandle(Protocol):
    def event(
        self,
        obj: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        action: str = SCHEDULING,
        related: Obj | None = None,
    ) -> None:
        """Record an Event regarding ``obj`` (a pod unless it names its kind; asynchronously, never
        blocking the cycle): ``action`` is what the scheduler was doing (``Scheduling``, ``Binding``,
        ``Preempting``), ``related`` a second object involved (the preemptor of a preempted pod)."""
