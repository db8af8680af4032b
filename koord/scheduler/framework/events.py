"""Cluster events and queueing hints (kube-scheduler's ``ClusterEvent`` and ``QueueingHintFn``): what a
plugin registers so that a pod it rejected leaves the unschedulable pods as soon as a change could help it,
and only then.

An event is a resource and an action (``Node/Add``, ``Pod/Delete``, ``Node/UpdateNodeTaint``...). A
hint looks at the changed object (old, new) and the pod and answers :data:`QUEUE` or :data:`SKIP`; no hint
means :data:`QUEUE`. A hint that raises counts as :data:`QUEUE`, as in kube-scheduler.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework.types import Obj


class Action(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_POD_LABEL = 64
    UPDATE_POD_SCALE_DOWN = 128
    UPDATE_POD_TOLERATIONS = 256
    UPDATE_POD_SCHEDULING_GATES = 512
    UPDATE_OTHER = 1024
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES
        | UPDATE_OTHER
    )
    ALL = ADD | DELETE | UPDATE


NODE, POD, ASSIGNED_POD, UNSCHEDULED_POD, WILDCARD = "Node", "Pod", "AssignedPod", "UnscheduledPod", "*"
"""Resources of events: ``Pod`` events are split as kube-scheduler splits them (a bound pod's change is an
``AssignedPod`` event, a pending one's ``UnscheduledPod``); other resources use their kind."""


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: Action
    label: str = ""

    def matches(self, happened: ClusterEvent) -> bool:
        """Whether this registered event covers ``happened`` (``*`` resource: every resource;
        ``Pod`` covers both pod kinds)."""
        resource = self.resource in (WILDCARD, happened.resource) or (
            self.resource == POD and happened.resource in (ASSIGNED_POD, UNSCHEDULED_POD)
        )
        return resource and bool(self.action & happened.action)

    def __str__(self) -> str:
        return self.label or f"{self.resource}/{self.action.name}"


class QueueingHint(enum.Enum):
    SKIP = 0
    QUEUE = 1


QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP

HintFn = Callable[[Obj, Any, Any], QueueingHint]
"""``hint(pod, old_object, new_object)``: whether this change may make ``pod`` schedulable."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: HintFn | None = None


# The events the scheduler itself raises, named as kube-scheduler logs them.
NODE_ADD = ClusterEvent(NODE, Action.ADD, "NodeAdd")
NODE_DELETE = ClusterEvent(NODE, Action.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, Action.ADD, "AssignedPodAdd")
ASSIGNED_POD_UPDATE = ClusterEvent(ASSIGNED_POD, Action.UPDATE, "AssignedPodUpdate")
ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, Action.DELETE, "AssignedPodDelete")
UNSCHEDULED_POD_UPDATE = ClusterEvent(UNSCHEDULED_POD, Action.UPDATE, "UnscheduledPodUpdate")
UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, Action.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(WILDCARD, Action.ALL, "ForceActivate")


def node_update_event(old: Obj, new: Obj) -> ClusterEvent | None:
    """Which kinds of node change happened (kube-scheduler's ``nodeSchedulingPropertiesChange``);
    ``None`` when nothing a scheduler looks at changed (a heartbeat)."""
    action = Action(0)
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_status.get("allocatable") != new_status.get("allocatable"):
        action |= Action.UPDATE_NODE_ALLOCATABLE
    if old_meta.get("labels") != new_meta.get("labels"):
        action |= Action.UPDATE_NODE_LABEL
    if old_spec.get("taints") != new_spec.get("taints") or old_spec.get("unschedulable") != new_spec.get(
        "unschedulable"
    ):
        action |= Action.UPDATE_NODE_TAINT
    if old_status.get("conditions") != new_status.get("conditions"):
        action |= Action.UPDATE_NODE_CONDITION
    if old_meta.get("annotations") != new_meta.get("annotations"):
        action |= Action.UPDATE_OTHER
    return ClusterEvent(NODE, action, "NodeUpdate") if action else None


def pod_update_event(old: Obj, new: Obj) -> ClusterEvent:
    """An assigned pod's change as kube-scheduler classifies it (labels, a scale-down of its requests)."""
    action = Action(0)
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        action |= Action.UPDATE_POD_LABEL
    if (old.get("spec") or {}).get("containers") != (new.get("spec") or {}).get("containers"):
        action |= Action.UPDATE_POD_SCALE_DOWN
    return ClusterEvent(ASSIGNED_POD, action or Action.UPDATE_OTHER, "AssignedPodUpdate")
