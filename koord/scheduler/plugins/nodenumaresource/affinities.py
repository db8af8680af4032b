"""The NUMA affinities a cycle's Filter chose for whole kinds of nodes (:mod:`.kinds`), as the topology
manager's shared affinities: each hint kept once, each node pointing at its kind's by its row in the
snapshot. A cycle over many alike nodes so stores a hint a kind instead of an entry a node, and Score
and Reserve look a node's up by its row."""

from __future__ import annotations

import numpy as np

from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.framework.snapshot import Snapshot


class KindAffinities:
    """The shared affinities of one cycle over one snapshot (its rows do not move during a cycle)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._layout = snapshot.layout
        self._of_row = np.full(len(snapshot), -1, dtype=np.int64)
        self.hints: list[tm.NUMATopologyHint] = []
        """Each hint chosen, once: what a row points at."""

    def of(self, snapshot: Snapshot | None) -> bool:
        """Whether rows of ``snapshot`` as it is now are these rows."""
        return snapshot is self._snapshot and snapshot.layout == self._layout

    def choose(self, rows: np.ndarray, which: np.ndarray, hints: list[tm.NUMATopologyHint]) -> None:
        """Row ``rows[i]`` gets ``hints[which[i]]`` (none where ``which[i]`` is negative)."""
        keep = which >= 0
        self._of_row[rows[keep]] = which[keep] + len(self.hints)
        self.hints.extend(hints)

    def indices(self, rows: np.ndarray) -> np.ndarray:
        """Each row's hint as its index into :attr:`hints`; -1: none."""
        out: np.ndarray = self._of_row[rows]
        return out

    def get(self, node: str) -> tm.NUMATopologyHint | None:
        row = self._snapshot.index.get(node)
        if row is None or not self.of(self._snapshot) or row >= len(self._of_row):
            return None
        k = int(self._of_row[row])
        return None if k < 0 else self.hints[k]


def shared_of(store: tm.Store, snapshot: Snapshot) -> KindAffinities | None:
    """The store's shared affinities over ``snapshot``, made on first use; ``None`` when the store holds
    another kind of them (the nodes then get their own entries)."""
    got = store.shared
    if got is None:
        got = store.shared = KindAffinities(snapshot)
    return got if isinstance(got, KindAffinities) and got.of(snapshot) else None
