"""SchedulingGates (PreEnqueue): a pod with ``spec.schedulingGates`` waits outside the active queue until
its gates are removed (kube-scheduler's ``schedulinggates``, KEP-3521)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import Action, ClusterEvent, ClusterEventWithHint, Obj, Status
from koord.scheduler.framework.events import QUEUE, SKIP, UNSCHEDULED_POD, QueueingHint

NAME = "SchedulingGates"
__all__ = ["NAME", "SchedulingGates"]  # the built-in table loads the plugin by these names


def gates(pod: Obj) -> list[str]:
    raw = (pod.get("spec") or {}).get("schedulingGates") or []
    return [str(g.get("name")) for g in raw if isinstance(g, Mapping)]


class SchedulingGates:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")

    def pre_enqueue(self, pod: Obj) -> Status | None:
        names = gates(pod)
        if not names:
            return None
        return Status.unresolvable(f"waiting for scheduling gates: [{' '.join(names)}]")

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_SCHEDULING_GATES | Action.UPDATE_OTHER),
                self._gates_gone,
            ),
        )

    @staticmethod
    def _gates_gone(pod: Obj, old: Any, new: Any) -> QueueingHint:
        meta, new_meta = pod.get("metadata") or {}, (new or {}).get("metadata") or {}
        same = meta.get("uid") == new_meta.get("uid")
        return QUEUE if same and not gates(new or {}) else SKIP
