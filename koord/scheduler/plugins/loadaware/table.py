"""The assign cache's per-node sums as one array, so LoadAware's filter and score over thousands of nodes
are a few vector operations.

A NodeMetric change, or a pod placed on or removed from a node, is not a change of the Node object, so
these facts cannot be snapshot columns (recomputed only when a node changes). Each known node gets a
*slot* (a row of :attr:`LoadTable.rows`) the first time a pass asks for it (unknown nodes share
:data:`NO_NODE`); LoadAware's snapshot column maps snapshot rows to slots, and every change of a node's
:class:`NodeState` rewrites that node's slot. A slot is kept for as long as the plugin lives (a node that
comes back gets its old one), so a snapshot column never points at a slot that changed owner.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import math

import numpy as np

from koord.scheduler.plugins.loadaware.nodestate import NodeState

AggKey = tuple[str, float]
HAS_METRIC, HAS_NODE_METRIC, UPDATE_TIME = 0, 1, 2
PLAIN = slice(3, 5)
PROD = slice(5, 7)
_FIRST_AGG = 7


def agg_columns(k: int) -> slice:
    """The columns of the ``k``-th aggregation."""
    return slice(_FIRST_AGG + 2 * k, _FIRST_AGG + 2 * k + 2)


NO_NODE = 0
"""The slot of every node whose Node object is unknown (a name in a request, a debug query): a row of
zeros that is never written, so such names take no room."""


class LoadTable:
    def __init__(self) -> None:
        self.slots: dict[str, int] = {}
        self.agg_keys: dict[AggKey, int] = {}
        self.rows = np.zeros((64, _FIRST_AGG), dtype=np.float64)
        self._used = NO_NODE + 1

    def slot(self, name: str, state: NodeState | None) -> int:
        """The slot of ``name`` (created and filled from ``state`` on first use)."""
        i = self.slots.get(name)
        if i is None:
            i = self._used
            self._used += 1
            if i >= len(self.rows):
                grown = np.zeros((2 * len(self.rows), self.rows.shape[1]), dtype=np.float64)
                grown[: len(self.rows)] = self.rows
                self.rows = grown
            self.slots[name] = i
            self.write(name, state)
        return i

    def agg_column(self, key: AggKey, states: dict[str, NodeState]) -> int:
        """The index of aggregation ``key`` (its columns created and filled for every slot on first
        use)."""
        k = self.agg_keys.get(key)
        if k is None:
            k = self.agg_keys[key] = len(self.agg_keys)
            self.rows = np.hstack([self.rows, np.zeros((len(self.rows), 2), dtype=np.float64)])
            cols = agg_columns(k)
            for name, i in self.slots.items():
                n = states.get(name)
                if n is not None and n.has_metric:
                    self.rows[i, cols] = n.existing(False, *key)
        return k

    def write(self, name: str, n: NodeState | None) -> None:
        """Rewrite the slot of ``name`` from its state (nothing when no pass asked for it yet)."""
        i = self.slots.get(name)
        if i is None:
            return
        row = self.rows[i]
        if n is None or not n.has_metric:
            row[HAS_METRIC] = row[HAS_NODE_METRIC] = 0.0
            return
        row[HAS_METRIC] = 1.0
        row[HAS_NODE_METRIC] = 1.0 if n.has_node_metric else 0.0
        row[UPDATE_TIME] = math.nan if n.status_time is None else n.status_time
        row[PLAIN] = n.existing(False, "", 0.0)
        row[PROD] = n.existing(True, "", 0.0)
        for key, k in self.agg_keys.items():
            row[agg_columns(k)] = n.existing(False, *key)

    def gather(self, slots: np.ndarray) -> np.ndarray:
        """The rows of ``slots`` (a copy)."""
        return np.take(self.rows, slots, axis=0)
