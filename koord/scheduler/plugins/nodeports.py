"""NodePorts (PreFilter, Filter): a pod's host ports must be free on the node (kube-scheduler's
``nodeports``): the same port and protocol on the same IP, or either side on every address."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    Obj,
    Status,
)
from koord.scheduler.framework.events import ASSIGNED_POD, NODE

NAME = "NodePorts"
__all__ = ["NAME", "NodePorts"]  # the built-in table loads the plugin by these names
ERR = "node(s) didn't have free ports for the requested pod ports"


class NodePorts:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        info = state.pod_info
        return None if info is not None and info.host_ports else SKIP

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        info = state.pod_info
        if info is None:
            return None
        for want in info.host_ports:
            if any(want.conflicts(used) for used in node_info.used_ports):
                return Status.unschedulable(ERR)
        return None

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, Action.DELETE)),
            ClusterEventWithHint(ClusterEvent(NODE, Action.ADD)),
        )
