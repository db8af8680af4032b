"""TaintToleration (Filter, PreScore, Score; kube-scheduler's ``tainttoleration``): a node's
``NoSchedule``/``NoExecute`` taints the pod does not tolerate keep it off ("node(s) had untolerated
taint(s)": since v1.34 the taint is not named); among the rest, nodes with fewer untolerated
``PreferNoSchedule`` taints score higher (reversed and normalised: the node with the most gets 0, none
gets 100).

Batch form: a node without hard taints passes whatever the pod tolerates, so only tainted nodes are
looked at one by one; the taints of each node are read once per node change (a derived column).
"""

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
from koord.scheduler.framework.events import NODE, QUEUE, SKIP, UNSCHEDULED_POD, QueueingHint
from koordshared.apis.core.node import tolerates

NAME = "TaintToleration"
__all__ = ["NAME", "TaintToleration"]  # the built-in table loads the plugin by these names
HARD = ("NoSchedule", "NoExecute")
_PREFER_KEY = "TaintToleration/prefer"

Taints = tuple[Mapping[str, Any], ...]


def _hard(ni: NodeInfo) -> Taints:
    return tuple(t for t in ni.taints if t.get("effect") in HARD)


def _soft(ni: NodeInfo) -> Taints:
    return tuple(t for t in ni.taints if t.get("effect") == "PreferNoSchedule")


def _tolerations(pod: Obj) -> list[Mapping[str, Any]]:
    return [t for t in (pod.get("spec") or {}).get("tolerations") or () if isinstance(t, Mapping)]


def _untolerated(taints: Taints, tolerations: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for taint in taints:
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"


class TaintToleration:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        taint = _untolerated(_hard(node_info), _tolerations(pod))
        return None if taint is None else Status.unresolvable(ERR_REASON_UNTOLERATED)

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        tainted = nodes.column("TaintToleration/tainted", lambda ni: bool(_hard(ni)), bool, of_node=True)
        if tainted is None:
            return nodes.mask(lambda ni: self.filter(state, pod, ni) is None)
        ok: np.ndarray = ~tainted
        tolerations = _tolerations(pod)
        for i in np.flatnonzero(tainted).tolist():
            ok[i] = _untolerated(_hard(nodes.info(i)), tolerations) is None
        return ok

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        prefer = [
            t for t in _tolerations(pod) if (t.get("effect") or "PreferNoSchedule") == "PreferNoSchedule"
        ]
        state.write(_PREFER_KEY, prefer)
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        prefer = state.get(_PREFER_KEY) or []
        return sum(1 for taint in _soft(node_info) if not any(tolerates(t, taint) for t in prefer))

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        tainted = nodes.column("TaintToleration/soft", lambda ni: bool(_soft(ni)), bool, of_node=True)
        if tainted is None:
            return np.fromiter((self.score(state, pod, ni) for ni in nodes), dtype=np.int64, count=len(nodes))
        out = np.zeros(len(nodes), dtype=np.int64)
        for i in np.flatnonzero(tainted).tolist():
            out[i] = self.score(state, pod, nodes.info(i))
        return out

    def normalize_scores(self, state: CycleState, pod: Obj, scores: np.ndarray) -> np.ndarray:
        """kube-scheduler's ``DefaultNormalizeScore`` reversed: fewer untolerated taints, higher score."""
        top = int(scores.max()) if len(scores) else 0
        if top == 0:
            return np.full(len(scores), 100, dtype=np.int64)
        return 100 - scores * 100 // top

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_TAINT), self._node_fits),
            ClusterEventWithHint(
                ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_TOLERATIONS | Action.UPDATE_OTHER)
            ),
        )

    @staticmethod
    def _node_fits(pod: Obj, old: Any, new: Any) -> QueueingHint:
        if new is None:
            return SKIP
        taints = [t for t in (new.get("spec") or {}).get("taints") or () if t.get("effect") in HARD]
        return QUEUE if _untolerated(tuple(taints), _tolerations(pod)) is None else SKIP
