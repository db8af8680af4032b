"""DeviceShare's batch forms of Filter and Score (``filter_nodes``, ``score_nodes``): one pass over the nodes
answering from what was worked out for the pod's shape on each node as it is, and through the plugin's
``filter``/``score`` elsewhere, so the answers are exactly the node-by-node ones. Pods of a steady GPU
workload meet nodes whose devices did not change since the last pod of their shape, so most nodes cost no
Python at all: the answers are kept per shape in arrays over the snapshot's rows, each beside the node
object and the device version (:attr:`.nodedevice.NodeDevice.version`) it was worked out with, and a
cycle compares those arrays with the current ones (the versions by row too, caught up from the cache's
log of changed nodes). Scores are kept as they are, Filter verdicts as codes (``CodedVerdicts``). When a
verdict may depend on more than the shape and the node (reservations restored on some node, preemption's
what-ifs, a designated allocation), every node goes through ``filter``/``score``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

import numpy as np

from koord.scheduler.framework import CycleState, NodeInfo, NodeSet, Obj, Status
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.plugins.deviceshare.cache import DeviceCache
from koord.scheduler.plugins.deviceshare.reservation import restore_state
from koord.scheduler.plugins.deviceshare.state import PodDeviceState

T = TypeVar("T")
SHAPES = 64
"""Pod shapes (with the kind of answer) whose answers are kept; the least recently used go first."""
NODE_COLUMN = "DeviceShare/node-id"
_NUMBERS = ("alike numbers",)
"""Where the numbers of nodes alike are kept by row, beside the shapes' answers."""


def _node_id(info: NodeInfo) -> int:
    return id(info.node) if info.node is not None else 0


class _Kept:
    """One shape's answers by snapshot row (a score, or a verdict's code into :attr:`statuses`), with the
    node object (its id; the object is kept alive beside it, so the id stays its) and the device version
    each was worked out with (0: none)."""

    __slots__ = ("answers", "codes", "node_ids", "nodes", "statuses", "versions")

    def __init__(self, rows: int) -> None:
        self.answers = np.zeros(rows, dtype=np.int64)
        self.nodes = np.empty(rows, dtype=object)
        self.node_ids = np.zeros(rows, dtype=np.int64)
        self.versions = np.zeros(rows, dtype=np.int64)
        self.statuses: list[Status | None] = [None]
        self.codes: dict[Status | None, int] = {None: 0}


def verdict_code(kept: _Kept, verdict: Status | None) -> int:
    """The code of a Filter verdict in ``kept`` (equal statuses share one: they read the same)."""
    found = kept.codes.get(verdict)
    if found is None:
        found = kept.codes[verdict] = len(kept.statuses)
        kept.statuses.append(verdict)
    return found


def score_code(kept: _Kept, score: int) -> int:
    """A score is kept as it is."""
    return score


class Answers:
    """The kept answers of one plugin, for one snapshot layout at a time (a node removed moves rows:
    everything is forgotten then)."""

    def __init__(self, cache: DeviceCache) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._shapes: OrderedDict[Hashable, _Kept] = OrderedDict()
        self._snapshot: Snapshot | None = None
        self._layout = -1
        self._versions = np.zeros(0, dtype=np.int64)
        """Each row's device version now, caught up from the cache's log of changed nodes."""
        self._position = 0
        self.computed = 0
        """Answers worked out through ``filter``/``score`` (not read from the arrays): for tests."""

    def get(
        self,
        kind: str,
        ps: PodDeviceState,
        generation: int,
        state: CycleState,
        pod: Obj,
        nodes: NodeSet,
        one: Callable[[CycleState, Obj, NodeInfo], T],
        encode: Callable[[_Kept, T], int],
        number: Callable[[NodeInfo], int],
        shared: Callable[[int], tuple[T] | None],
    ) -> tuple[np.ndarray, list[Status | None]] | list[T]:
        """``one(state, pod, node)`` (``kind``: "filter" or "score") for every node: from the kept arrays
        where they hold it, as codes (``encode``: :func:`verdict_code` or :func:`score_code`) with the
        statuses the codes of verdicts stand for; as ``one``'s answers when they may depend on more than
        the shape and the node. Filter's checks made before the devices (a shared GPU on the node's
        model, the isolation provider) read only the node object and the pod's shape, both part of what
        an answer is kept beside. A node not in the arrays is first looked up among nodes alike: ``number``
        says what it is (0: nothing to say; kept by row like the answers, for every shape), ``shared``
        the answer of a node alike by that number (a 1-tuple), else it is worked out."""
        snapshot = nodes.snapshot
        if (
            ps.designated is not None
            or ps.preemptible
            or restore_state(state).nodes
            or nodes.rows is None
            or not isinstance(snapshot, Snapshot)
        ):
            self.computed += len(nodes)
            return [one(state, pod, info) for info in nodes]
        rows = nodes.rows
        # Copies: the arrays behind them move on with the snapshot and the cache.
        node_ids = snapshot.derived(NODE_COLUMN, _node_id, np.int64, of_node=True).copy()
        key = (kind, ps.signature, generation)
        with self._lock:
            versions = self._sync(snapshot).copy()
            kept = self._kept(key, snapshot)
            n = len(versions)
            # Compared over every row (contiguous), then taken in the search order once.
            current = (kept.node_ids[:n] == node_ids) & (kept.versions[:n] == versions) & (versions > 0)
            found = current[rows]
            out = kept.answers[rows]
        missed = np.flatnonzero(~found).tolist()
        if not missed:
            return out, list(kept.statuses)
        self.computed += len(missed)
        worked = [nodes.info(i) for i in missed]
        at = rows[missed]
        answers: list[T] = []
        seen: dict[int, tuple[T] | None] = {}
        for info, alike in zip(
            worked, self._numbers(snapshot, worked, at, node_ids, versions, number), strict=True
        ):
            got = (seen[alike] if alike in seen else shared(alike)) if alike else None
            if got is None:
                answers.append(one(state, pod, info))
                if alike:  # what ``one`` worked out serves the next nodes alike
                    seen[alike] = shared(alike)
            else:
                answers.append(got[0])
                seen[alike] = got
        with self._lock:
            kept = self._kept(key, snapshot)
            codes = [encode(kept, a) for a in answers]
            out[missed] = codes
            # The versions read before the answers were worked out: a change meanwhile shows as a
            # newer version next time, and the answer is worked out again.
            kept.answers[at] = codes
            kept.nodes[at] = [info.node for info in worked]
            kept.node_ids[at] = node_ids[at]
            kept.versions[at] = versions[at]
            return out, list(kept.statuses)

    def _numbers(
        self,
        snapshot: Snapshot,
        worked: list[NodeInfo],
        at: np.ndarray,
        node_ids: np.ndarray,
        versions: np.ndarray,
        number: Callable[[NodeInfo], int],
    ) -> list[int]:
        """``number`` of each node of ``worked`` (at rows ``at``), kept by row beside the node object and
        the device version like an answer, for every shape and kind."""
        with self._lock:
            kept = self._kept(_NUMBERS, snapshot)
            known = (kept.node_ids[at] == node_ids[at]) & (kept.versions[at] == versions[at])
            numbers = kept.answers[at]
        fresh = np.flatnonzero(~known).tolist()
        if fresh:
            numbers[fresh] = [number(worked[j]) for j in fresh]
            where = at[fresh]
            with self._lock:
                kept = self._kept(_NUMBERS, snapshot)
                kept.answers[where] = numbers[fresh]
                kept.nodes[where] = [worked[j].node for j in fresh]
                kept.node_ids[where] = node_ids[where]
                kept.versions[where] = versions[where]
        listed: list[int] = numbers.tolist()
        return listed

    def _sync(self, snapshot: Snapshot) -> np.ndarray:
        """The rows' device versions now (the answers kept for another layout forgotten)."""
        changed, self._position = self._cache.changed_since(self._position)
        if snapshot is not self._snapshot or snapshot.layout != self._layout:
            self._shapes.clear()
            self._snapshot, self._layout = snapshot, snapshot.layout
            changed = None
        if changed is None or len(self._versions) != len(snapshot):
            names = [info.name for info in snapshot.infos]
            self._versions = np.fromiter(self._cache.versions(names), dtype=np.int64, count=len(names))
        elif changed:
            index = snapshot.index
            rows = [row for name in changed if (row := index.get(name)) is not None]
            names = [snapshot.infos[row].name for row in rows]
            self._versions[rows] = self._cache.versions(names)
        return self._versions

    def _kept(self, key: Hashable, snapshot: Snapshot) -> _Kept:
        kept = self._shapes.get(key)
        size = max(len(snapshot), 1)
        if kept is None or len(kept.answers) < size:
            grown = _Kept(max(size, 2 * len(kept.answers)) if kept is not None else size)
            if kept is not None:
                n = len(kept.answers)
                grown.answers[:n], grown.nodes[:n] = kept.answers, kept.nodes
                grown.node_ids[:n], grown.versions[:n] = kept.node_ids, kept.versions
                grown.statuses, grown.codes = kept.statuses, kept.codes
            kept = self._shapes[key] = grown
            while len(self._shapes) > SHAPES:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
        return kept
