"""The cluster as one scheduling cycle sees it (kube-scheduler's ``cache.Snapshot``): the NodeInfos, in a
stable row order, and the same facts as arrays, one row per node, so a pass over thousands of nodes is a
few vector operations.

``allocatable``, ``requested`` (rows: nodes; columns: :attr:`Snapshot.resources`) and ``non_zero``
(cpu, memory requested with kube-scheduler's scoring defaults) are kept in step with the NodeInfos.
:meth:`Snapshot.derived` gives a plugin its own per-node column (taints, labels it cares about...),
computed once per node change, not once per cycle. The cache updates the snapshot between cycles with
the nodes that changed; during a cycle nothing else writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from koord.scheduler.framework.nodeset import NodeSet
from koord.scheduler.framework.types import CPU, EPHEMERAL, MEMORY, PODS, NodeInfo

_FIRST = (CPU, MEMORY, PODS, EPHEMERAL)


class Snapshot:
    def __init__(self) -> None:
        self.generation = 0
        """The cache generation this snapshot reflects."""
        self.infos: list[NodeInfo] = []
        self.index: dict[str, int] = {}
        self.resources: list[str] = list(_FIRST)
        self._col = {r: i for i, r in enumerate(self.resources)}
        self._cap = 0
        self.allocatable = np.zeros((0, len(_FIRST)), dtype=np.int64)
        self.requested = np.zeros((0, len(_FIRST)), dtype=np.int64)
        self.non_zero = np.zeros((0, 2), dtype=np.int64)
        self._stamp = np.zeros(0, dtype=np.int64)
        self._next_stamp = 1
        self._derived: dict[str, tuple[np.ndarray, np.ndarray, Callable[[NodeInfo], Any]]] = {}
        self.with_affinity: list[NodeInfo] = []
        """Nodes with pods that have (anti-)affinity terms; kept by :meth:`refresh_affinity_lists`."""
        self.with_required_anti_affinity: list[NodeInfo] = []
        self._affinity_dirty = True

    # ---- reading --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.infos)

    def node_info(self, name: str) -> NodeInfo | None:
        i = self.index.get(name)
        return None if i is None else self.infos[i]

    def node_infos(self) -> list[NodeInfo]:
        return self.infos

    def column(self, resource: str) -> int:
        """The column of ``resource`` in :attr:`allocatable` and :attr:`requested` (added on first
        use: a resource nothing has asked about yet is 0 everywhere)."""
        col = self._col.get(resource)
        if col is None:
            col = self._add_column(resource)
        return col

    def rotated(self, start: int) -> NodeSet:
        """Every node, starting at row ``start`` and wrapping around (the cycle's search order)."""
        n = len(self.infos)
        rows = np.arange(n, dtype=np.int64)
        return NodeSet(self, np.roll(rows, -start) if n and start % n else rows)

    def derived(self, key: str, fn: Callable[[NodeInfo], Any], dtype: Any = object) -> np.ndarray:
        """``fn(node_info)`` for every row, recomputed only for rows whose node changed since. ``key``
        names the column (one per plugin and meaning); ``fn`` must depend on the NodeInfo alone. A
        subarray ``dtype`` (``(np.float64, (k,))``) makes a 2-D column of ``k`` values per node."""
        n = len(self.infos)
        entry = self._derived.get(key)
        if entry is None:
            values = np.empty(self._cap, dtype=dtype)
            stamps = np.zeros(self._cap, dtype=np.int64)
            entry = self._derived[key] = (values, stamps, fn)
        values, stamps, _ = entry
        if len(values) < self._cap:
            values, stamps = self._grow_derived(key, values.dtype)
        stale = np.nonzero(stamps[:n] != self._stamp[:n])[0]
        if len(stale):
            infos = self.infos
            for i in stale.tolist():
                values[i] = fn(infos[i])
            stamps[stale] = self._stamp[stale]
        return values[:n]

    def refresh_affinity_lists(self) -> None:
        if self._affinity_dirty:
            self.with_affinity = [ni for ni in self.infos if ni.pods_with_affinity]
            self.with_required_anti_affinity = [
                ni for ni in self.infos if ni.pods_with_required_anti_affinity
            ]
            self._affinity_dirty = False

    # ---- writing (the cache, between cycles) ------------------------------------------------------

    def set(self, info: NodeInfo) -> None:
        """Add or replace the row of ``info.name``."""
        i = self.index.get(info.name)
        if i is None:
            i = len(self.infos)
            self._ensure(i + 1)
            self.infos.append(info)
            self.index[info.name] = i
        else:
            self.infos[i] = info
        info.index = i
        self._write_row(i, info)
        self._affinity_dirty = True

    def remove(self, name: str) -> None:
        i = self.index.pop(name, None)
        if i is None:
            return
        last = len(self.infos) - 1
        if i != last:  # the last row moves into the hole
            moved = self.infos[last]
            self.infos[i] = moved
            moved.index = i
            self.index[moved.name] = i
            for arr in (self.allocatable, self.requested, self.non_zero, self._stamp):
                arr[i] = arr[last]
            for values, stamps, _ in self._derived.values():
                values[i], stamps[i] = values[last], stamps[last]
        self.infos.pop()
        self._affinity_dirty = True

    def _write_row(self, i: int, info: NodeInfo) -> None:
        for name in (*info.allocatable, *info.requested):
            if name not in self._col:
                self._add_column(name)
        alloc = np.zeros(len(self.resources), dtype=np.int64)
        req = np.zeros(len(self.resources), dtype=np.int64)
        col = self._col
        for name, v in info.allocatable.items():
            alloc[col[name]] = v
        for name, v in info.requested.items():
            req[col[name]] = v
        self.allocatable[i] = alloc
        self.requested[i] = req
        self.non_zero[i] = (info.non_zero_cpu, info.non_zero_memory)
        self._stamp[i] = self._next_stamp
        self._next_stamp += 1

    def _ensure(self, rows: int) -> None:
        if rows <= self._cap:
            return
        cap = max(rows, 2 * self._cap, 64)
        self.allocatable = _grown(self.allocatable, cap)
        self.requested = _grown(self.requested, cap)
        self.non_zero = _grown(self.non_zero, cap)
        self._stamp = _grown(self._stamp, cap)
        self._cap = cap
        for key in list(self._derived):
            self._grow_derived(key, self._derived[key][0].dtype)

    def _grow_derived(self, key: str, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        values, stamps, fn = self._derived[key]
        new_values = np.empty((self._cap, *values.shape[1:]), dtype=dtype)
        new_values[: len(values)] = values
        new_stamps = np.zeros(self._cap, dtype=np.int64)
        new_stamps[: len(stamps)] = stamps
        self._derived[key] = (new_values, new_stamps, fn)
        return new_values, new_stamps

    def _add_column(self, resource: str) -> int:
        col = len(self.resources)
        self.resources.append(resource)
        self._col[resource] = col
        pad = np.zeros((self.allocatable.shape[0], 1), dtype=np.int64)
        self.allocatable = np.hstack([self.allocatable, pad])
        self.requested = np.hstack([self.requested, pad.copy()])
        for i, info in enumerate(self.infos):
            self.allocatable[i, col] = info.allocatable.get(resource, 0)
            self.requested[i, col] = info.requested.get(resource, 0)
        return col


def _grown(arr: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows, *arr.shape[1:]), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out
