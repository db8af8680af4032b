"""NodeResourcesFit and NodeResourcesBalancedAllocation (kube-scheduler's ``noderesources``).

NodeResourcesFit, Filter: the node's pods plus this one within its allocatable pod count, and every
resource the pod requests within what is left (``Too many pods``, ``Insufficient <resource>``; unresolvable
when the request is above the node's whole allocatable, so no preemption could help). Score: the
configured strategy over the configured resources (:mod:`.scoring`). BalancedAllocation, Score: nodes
whose requested fractions are closest to each other score highest; skipped for a pod that requests
none of its resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CodedVerdicts,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    PodInfo,
    Status,
)
from koord.scheduler.framework.events import ASSIGNED_POD, NODE
from koord.scheduler.framework.types import PODS
from koord.scheduler.plugins.noderesources import scoring
from koord.scheduler.plugins.noderesources.args import (
    LEAST,
    MOST,
    parse_balanced_args,
    parse_fit_args,
)

FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
TOO_MANY_PODS = "Too many pods"

_EVENTS = (
    ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN)),
    ClusterEventWithHint(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE)),
)


def _insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def _verdict(reasons: list[str], unresolvable: bool) -> Status | None:
    """NodeResourcesFit's Filter status for ``reasons`` (none: the node fits)."""
    if not reasons:
        return None
    return Status.unresolvable(*reasons) if unresolvable else Status.unschedulable(*reasons)


def _pod(state: CycleState, pod: Obj) -> PodInfo:
    return state.pod_info if state.pod_info is not None else PodInfo(pod)


class NodeResourcesFit:
    name = FIT

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args = parse_fit_args(args)
        self.resources = [name for name, _ in self.args.scoring.resources]
        self.weights = np.asarray([w for _, w in self.args.scoring.resources], dtype=np.int64)

    def _wanted(self, info: PodInfo) -> list[tuple[str, int]]:
        return [(r, v) for r, v in info.requests.items() if v > 0 and r != PODS and not self.args.ignores(r)]

    def insufficient(self, info: PodInfo, node: NodeInfo) -> tuple[list[str], bool]:
        """The reasons the node cannot take the pod (empty: it can), and whether they are unresolvable."""
        reasons: list[str] = []
        unresolvable = False
        if node.requested.get(PODS, 0) + 1 > node.allocatable.get(PODS, 0):
            reasons.append(TOO_MANY_PODS)
        for name, want in self._wanted(info):
            alloc = node.allocatable.get(name, 0)
            if want > alloc - node.requested.get(name, 0):
                reasons.append(_insufficient(name))
                unresolvable |= want > alloc
        return reasons, unresolvable

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        return _verdict(*self.insufficient(_pod(state, pod), node_info))

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        snap, rows = nodes.snapshot, nodes.rows
        if snap is None or rows is None:
            return nodes.mask(lambda ni: self.filter(state, pod, ni) is None)
        info = _pod(state, pod)
        col = snap.column(PODS)
        ok: np.ndarray = snap.requested[rows, col] + 1 <= snap.allocatable[rows, col]
        for name, want in self._wanted(info):
            c = snap.column(name)
            ok &= want <= snap.allocatable[rows, c] - snap.requested[rows, c]
        return ok

    def why_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> CodedVerdicts:
        """:meth:`filter`'s answers from the snapshot's arrays: a node's code has a bit per reason (too
        many pods, then each resource short, in :meth:`filter`'s order) and one for unresolvable, so the
        distinct codes are the distinct statuses."""
        snap, rows = nodes.snapshot, nodes.rows
        if snap is None or rows is None:
            return CodedVerdicts(np.arange(len(nodes)), [self.filter(state, pod, ni) for ni in nodes])
        wanted = self._wanted(_pod(state, pod))
        col = snap.column(PODS)
        codes = (snap.requested[rows, col] + 1 > snap.allocatable[rows, col]).astype(np.int64)
        unresolvable = np.zeros(len(rows), dtype=bool)
        for bit, (name, want) in enumerate(wanted, start=1):
            c = snap.column(name)
            alloc = snap.allocatable[rows, c]
            short = want > alloc - snap.requested[rows, c]
            codes |= short.astype(np.int64) << bit
            unresolvable |= short & (want > alloc)
        codes |= unresolvable.astype(np.int64) << (len(wanted) + 1)
        distinct, inverse = np.unique(codes, return_inverse=True)
        reasons = [TOO_MANY_PODS] + [_insufficient(name) for name, _ in wanted]
        statuses = [
            _verdict([r for bit, r in enumerate(reasons) if code >> bit & 1], bool(code >> len(reasons) & 1))
            for code in distinct.tolist()
        ]
        return CodedVerdicts(inverse.reshape(-1), statuses)

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return int(self.score_nodes(state, pod, NodeSet(None, None, [node_info]))[0])

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        req, alloc = scoring.matrices(nodes, _pod(state, pod), self.resources, use_requested=False)
        strategy = self.args.scoring
        if strategy.type == LEAST:
            return scoring.least_allocated(req, alloc, self.weights)
        if strategy.type == MOST:
            return scoring.most_allocated(req, alloc, self.weights)
        return scoring.requested_to_capacity_ratio(req, alloc, self.weights, strategy.shape)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return _EVENTS


class NodeResourcesBalancedAllocation:
    name = BALANCED

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.resources = [name for name, _ in parse_balanced_args(args)]

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        info = _pod(state, pod)
        return None if any(info.requests.get(r, 0) for r in self.resources) else SKIP

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return int(self.score_nodes(state, pod, NodeSet(None, None, [node_info]))[0])

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        req, alloc = scoring.matrices(nodes, _pod(state, pod), self.resources, use_requested=True)
        return scoring.balanced(req, alloc)
