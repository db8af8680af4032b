"""koord-scheduler's Events as kube-scheduler's profile recorders write them (``events.k8s.io/v1``,
:mod:`koordshared.kube.eventsv1`): one recorder per profile, named after its scheduler; an Event regarding a
pod is reported by the profile that schedules it (a Reservation's by its template's), a Preempted one by
the preemptor's; ``regarding`` is the object, a Pod unless it names its kind (as the Go type says it
is in kube-scheduler); the note is cut at the API's limit as ``truncateMessage`` cuts it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from koord.scheduler.framework.types import Obj
from koordshared.apis.meta.groups import PODS
from koordshared.apis.scheduling import reservation
from koordshared.kube.eventsv1 import EventBroadcaster, EventRecorder
from koordshared.kube.objectref import NoKind, ObjectRef

log = logging.getLogger(__name__)

NOTE_LIMIT = 1024
"""The longest note kube-apiserver takes (``NoteLengthLimit``)."""


def truncate_message(message: str) -> str:
    """kube-scheduler's ``truncateMessage``: a note over the limit is cut and ends in `` ...``."""
    if len(message) <= NOTE_LIMIT:
        return message
    return message[: NOTE_LIMIT - 4] + " ..."


class ProfileEvents:
    """The recorders of ``scheduler_names`` (the first one reports what no profile schedules)."""

    def __init__(self, broadcaster: EventBroadcaster, scheduler_names: Sequence[str]) -> None:
        self._recorders = {name: broadcaster.new_recorder(name) for name in scheduler_names}
        self._default = self._recorders[scheduler_names[0]]

    def event(self, obj: Obj, related: Obj | None, type_: str, reason: str, action: str, note: str) -> None:
        try:
            regarding = ObjectRef.of(obj, PODS)
            other = ObjectRef.of(related, PODS) if related is not None else None
        except NoKind as err:
            log.error("event %s not recorded: %s", reason, err)
            return
        recorder = self._recorder(related if related is not None else obj)
        recorder.eventf(regarding, other, type_, reason, action, truncate_message(note))

    def _recorder(self, obj: Obj) -> EventRecorder:
        if obj.get("kind") == "Reservation":
            name = reservation.scheduler_of(obj)
        else:
            name = str((obj.get("spec") or {}).get("schedulerName") or "")
        return self._recorders.get(name, self._default)
