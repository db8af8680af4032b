"""Plugins whose PreFilter and PreScore compute, for the pod being scheduled, one object that then answers
for any nodes at once (kube-scheduler's pre-computed cycle state, with the framework's batch forms):
:class:`Prepared` supplies Filter and its batch form, the PreFilterExtensions (AddPod/RemovePod, for
preemption's what-ifs on a clone of the state), Score and its batch form, and NormalizeScore from the
objects PreFilter and PreScore wrote to the cycle state. The verdicts of the batch Filter are kept for
the cycle, so the reasons of thousands of rejected nodes (a pod that fits nowhere) are read, not
computed again node by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from koord.scheduler.framework.interface import CycleState, Status
from koord.scheduler.framework.snapshot import NodeSet, Snapshot
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo


class FilterState(Protocol):
    snapshot: Snapshot
    statuses: Sequence[Status | None]
    """Verdict -> what Filter answers (verdict 0: the node fits, ``None``)."""

    def verdicts(self, nodes: NodeSet) -> np.ndarray:
        """One verdict per node (nodes outside the snapshot are looked up by their labels)."""

    def update(self, other: PodInfo, node: Obj | None, delta: int) -> None:
        """``other`` added to (``delta`` 1) or removed from (-1) ``node``."""


class ScoreState(Protocol):
    def scores(self, nodes: NodeSet) -> np.ndarray: ...

    def normalize(self, scores: np.ndarray) -> np.ndarray:
        """The scores :meth:`scores` gave for the nodes of the cycle, in 0..100."""


class Prepared:
    """Filter and Score from the states a subclass's PreFilter and PreScore wrote under these keys."""

    pre_filter_key = ""
    pre_score_key = ""

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        s: FilterState = state.read(self.pre_filter_key)
        kept: np.ndarray | None = state.get(self.pre_filter_key + "/verdicts")
        row = node_info.index
        if (
            kept is not None
            and 0 <= row < len(kept)
            and kept[row] >= 0
            and s.snapshot.infos[row] is node_info
        ):
            return s.statuses[int(kept[row])]
        return s.statuses[int(s.verdicts(NodeSet(None, None, [node_info]))[0])]

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        s: FilterState = state.read(self.pre_filter_key)
        verdicts = s.verdicts(nodes)
        if nodes.snapshot is s.snapshot and nodes.rows is not None:
            key = self.pre_filter_key + "/verdicts"
            kept: np.ndarray | None = state.get(key)
            if kept is None or len(kept) != len(s.snapshot):
                kept = np.full(len(s.snapshot), -1, dtype=np.int8)
                state.write(key, kept)
            kept[nodes.rows] = verdicts
        fits: np.ndarray = verdicts == 0
        return fits

    def add_pod(self, state: CycleState, pod: Obj, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        self._what_if(state, to_add, node_info, 1)
        return None

    def remove_pod(
        self, state: CycleState, pod: Obj, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        self._what_if(state, to_remove, node_info, -1)
        return None

    def _what_if(self, state: CycleState, other: PodInfo, node_info: NodeInfo, delta: int) -> None:
        s: FilterState | None = state.get(self.pre_filter_key)
        if s is not None:
            s.update(other, node_info.node, delta)
            state.delete(self.pre_filter_key + "/verdicts")  # kept verdicts are of the state before

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        s: ScoreState = state.read(self.pre_score_key)
        return int(s.scores(NodeSet(None, None, [node_info]))[0])

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        s: ScoreState = state.read(self.pre_score_key)
        return s.scores(nodes)

    def normalize_scores(self, state: CycleState, pod: Obj, scores: np.ndarray) -> np.ndarray:
        s: ScoreState = state.read(self.pre_score_key)
        return s.normalize(scores)
