"""NodeUnschedulable (Filter): a cordoned node (``spec.unschedulable``) takes only pods that tolerate the
``node.kubernetes.io/unschedulable:NoSchedule`` taint (kube-scheduler's ``nodeunschedulable``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koord.scheduler.framework import (
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    Status,
)
from koord.scheduler.framework.events import NODE
from koordshared.apis.core.node import tolerates

NAME = "NodeUnschedulable"
__all__ = ["NAME", "NodeUnschedulable"]  # the built-in table loads the plugin by these names
ERR = "node(s) were unschedulable"
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _cordoned(ni: NodeInfo) -> bool:
    return bool(((ni.node or {}).get("spec") or {}).get("unschedulable"))


def _tolerated(pod: Obj) -> bool:
    return any(tolerates(t, TAINT) for t in (pod.get("spec") or {}).get("tolerations") or ())


class NodeUnschedulable:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        if _cordoned(node_info) and not _tolerated(pod):
            return Status.unresolvable(ERR)
        return None

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        if _tolerated(pod):
            return np.ones(len(nodes), dtype=bool)
        cordoned = nodes.column(NAME, _cordoned, bool)
        if cordoned is None:
            return nodes.mask(lambda ni: not _cordoned(ni))
        return ~cordoned

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_TAINT)),)
