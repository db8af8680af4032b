"""Each node's kind (:meth:`.manager.ResourceManager.kind`: its report, holding, steering labels and
strategy) as an integer code in an array over the snapshot's rows, so that a cycle groups a thousand nodes
by kind with numpy instead of asking each. A row is worked out again when the manager logs a change of its
node's report or holding, or when the row gets another node object (a derived column of the node object
tells)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from koord.scheduler.framework import NodeInfo, NodeSet
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager

NODE_COLUMN = "NodeNUMAResource/node-id"


def _node_id(info: NodeInfo) -> int:
    return id(info.node) if info.node is not None else 0


class KindCodes:
    """The codes of one plugin, for one snapshot layout at a time (a node removed moves rows: all are
    worked out again then). Code 0: not worked out; -1: a row without a node object."""

    def __init__(self, manager: ResourceManager) -> None:
        self._manager = manager
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._layout = -1
        self._position = 0
        self._codes = np.zeros(0, dtype=np.int64)
        self._node_ids = np.zeros(0, dtype=np.int64)
        # the node objects the codes were worked out with, so that their ids stay theirs
        self._nodes = np.empty(0, dtype=object)
        self._table: dict[tuple[Any, ...], int] = {}
        self._current: tuple[int, int] | None = None
        """(the snapshot's written rows, the manager's log position) when every row was last current."""
        self.worked_out = 0
        """Rows whose kind was asked of the manager: for tests."""
        self.checked = 0
        """Times every row was checked for a change: for tests."""

    def codes(self, nodes: NodeSet) -> np.ndarray | None:
        """The codes of ``nodes`` (equal codes: equal kinds); ``None`` when they have no rows."""
        snapshot, rows = nodes.snapshot, nodes.rows
        if rows is None or not isinstance(snapshot, Snapshot):
            return None
        node_ids = snapshot.derived(NODE_COLUMN, _node_id, np.int64, of_node=True)
        with self._lock:
            self._catch_up(snapshot)
            # Every row is brought up to date at once: a second ask in the cycle (Score after Filter)
            # finds nothing written since and reads the codes as they are.
            now = (snapshot.written, self._position)
            if self._current != now:
                n = len(snapshot)
                stale = np.flatnonzero((self._codes[:n] == 0) | (self._node_ids[:n] != node_ids))
                if len(stale):
                    self._work_out(snapshot, stale.tolist(), node_ids)
                self._current = now
                self.checked += 1
            out: np.ndarray = self._codes[rows]
            return out

    def _catch_up(self, snapshot: Snapshot) -> None:
        size = len(snapshot)
        if (
            snapshot is not self._snapshot
            or snapshot.layout != self._layout
            or len(self._table) > 4 * size + 1024
        ):
            self._snapshot, self._layout = snapshot, snapshot.layout
            self._codes = np.zeros(size, dtype=np.int64)
            self._node_ids = np.zeros(size, dtype=np.int64)
            self._nodes = np.empty(size, dtype=object)
            self._table.clear()
            self._current = None
            _, self._position = self._manager.changed_since(self._position)
            return
        if len(self._codes) < size:
            grown = max(size, 2 * len(self._codes))
            self._codes = np.concatenate((self._codes, np.zeros(grown - len(self._codes), dtype=np.int64)))
            self._node_ids = np.concatenate(
                (self._node_ids, np.zeros(grown - len(self._node_ids), dtype=np.int64))
            )
            nodes = np.empty(grown, dtype=object)
            nodes[: len(self._nodes)] = self._nodes
            self._nodes = nodes
            self._current = None
        changed, self._position = self._manager.changed_since(self._position)
        if changed is None:
            self._codes[:] = 0
            self._current = None
            return
        index = snapshot.index
        for name in changed:
            row = index.get(name)
            if row is not None:
                self._codes[row] = 0

    def _work_out(self, snapshot: Snapshot, rows: list[int], node_ids: np.ndarray) -> None:
        # The log position was read before: a change meanwhile is caught up next time.
        infos = snapshot.infos
        present = [(r, infos[r].name, node) for r in rows if (node := infos[r].node) is not None]
        kinds = self._manager.kinds([(name, node) for _, name, node in present])
        table = self._table
        for r in rows:
            self._codes[r] = -1
        for (r, _, node), kind in zip(present, kinds, strict=True):
            self._codes[r] = table.setdefault(kind, len(table) + 1)
            self._nodes[r] = node
        at = np.asarray(rows, dtype=np.int64)
        self._node_ids[at] = node_ids[at]
        self.worked_out += len(rows)


def one_of_each(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For positive ``codes``: each distinct code (ascending), a position holding it (any one: they are
    alike), and each position's index among the distinct codes; without a sort (codes are small
    integers)."""
    if not len(codes):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    at = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
    at[codes] = np.arange(len(codes), dtype=np.int64)
    present = np.flatnonzero(at >= 0)
    index = at  # reused: a code's index among the distinct ones
    positions = at[present]
    index[present] = np.arange(len(present), dtype=np.int64)
    return present, positions, index[codes]
