"""PodTopologySpread's PreScore, Score and NormalizeScore (kube-scheduler's ``podtopologyspread/scoring.go``)
over the snapshot's arrays.

For the ScheduleAnyway constraints (or the default ones): a node's raw score is the sum over the
constraints whose key it has of ``matching pods in its domain * log(domains + 2) + (maxSkew - 1)``,
rounded; the domains are those of the filtered nodes (for the hostname key: their number), the pods
are counted on every node that has all the keys and passes the node inclusion policies, and for the
hostname key on the node itself. Filtered nodes lacking a key are ignored (score 0), except under the
System defaults, which spread by hostname on nodes without a zone. NormalizeScore turns fewer pods
into more points: ``100 * (max + min - score) / max`` (100 everywhere when max is 0).
"""

from __future__ import annotations

import numpy as np

from koord.scheduler.framework import MAX_NODE_SCORE, NodeSet, Obj, Snapshot
from koord.scheduler.framework.snapshot import at_codes
from koord.scheduler.plugins.podtopologyspread.args import HOSTNAME
from koord.scheduler.plugins.podtopologyspread.constraints import (
    Constraint,
    count_on,
    domains_of,
    included,
    matching_pods,
)


class ScoreState:
    """What PreScore computed for one pod; :meth:`scores` remembers which nodes it ignored for
    NormalizeScore."""

    __slots__ = (
        "constraints",
        "counts",
        "ignored",
        "missing",
        "namespace",
        "require_all",
        "snapshot",
        "weights",
    )

    def __init__(
        self, snapshot: Snapshot, constraints: tuple[Constraint, ...], namespace: str, require_all: bool
    ) -> None:
        self.snapshot = snapshot
        self.constraints = constraints
        self.namespace = namespace
        self.require_all = require_all
        self.weights = np.zeros(len(constraints))
        self.counts: list[np.ndarray | None] = []
        self.missing: list[int] = []
        """Per constraint: the code that stands for "no such label" (kube-scheduler reads an absent
        label as the empty value), so such nodes form one domain when keys are not all required."""
        self.ignored = np.zeros(0, dtype=bool)

    def _domains(self, i: int, codes: np.ndarray) -> np.ndarray:
        return np.where(codes == -1, self.missing[i], codes)

    @classmethod
    def build(
        cls,
        snapshot: Snapshot,
        pod: Obj,
        constraints: tuple[Constraint, ...],
        filtered: NodeSet,
        require_all: bool,
    ) -> ScoreState:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        s = cls(snapshot, constraints, namespace, require_all)
        ignored = s._ignored(filtered)
        columns = [snapshot.topology(c.topology_key) for c in constraints]
        every = np.logical_and.reduce([codes >= 0 for codes, _ in columns])
        for i, (c, (codes, table)) in enumerate(zip(constraints, columns, strict=True)):
            s.missing.append(table.get("", len(table)))
            if c.topology_key == HOSTNAME:
                s.weights[i] = np.log(len(filtered) - int(ignored.sum()) + 2)
                s.counts.append(None)
                continue
            kept = s._domains(i, snapshot.topology_of(filtered, c.topology_key))[~ignored]
            s.weights[i] = np.log(len(np.unique(kept)) + 2)
            mask = included(snapshot, pod, c)
            domains = None
            if mask is not None or not every.all():
                eligible = every if require_all else np.ones(len(codes), dtype=bool)
                eligible = eligible if mask is None else eligible & mask
                domains = np.where(eligible, s._domains(i, codes), -1)
            s.counts.append(
                domains_of(snapshot, namespace, c.selector, c.topology_key, domains, len(table) + 1)[0]
            )
        return s

    def _ignored(self, nodes: NodeSet) -> np.ndarray:
        if not self.require_all:
            return np.zeros(len(nodes), dtype=bool)
        has_all = np.logical_and.reduce(
            [self.snapshot.topology_of(nodes, c.topology_key) != -1 for c in self.constraints]
        )
        out: np.ndarray = ~has_all
        return out

    def scores(self, nodes: NodeSet) -> np.ndarray:
        total = np.zeros(len(nodes))
        for i, c in enumerate(self.constraints):
            codes = self.snapshot.topology_of(nodes, c.topology_key)
            counts = self.counts[i]
            if counts is None:
                column = matching_pods(self.snapshot, self.namespace, c.selector)
                here = (
                    column[nodes.rows]
                    if nodes.snapshot is self.snapshot and nodes.rows is not None
                    else np.array([count_on(ni, self.namespace, c.selector) for ni in nodes], dtype=np.int64)
                )
            else:
                here = at_codes(counts, self._domains(i, codes))
            total += np.where(codes != -1, here * self.weights[i] + (c.max_skew - 1), 0.0)
        self.ignored = self._ignored(nodes)
        out: np.ndarray = np.where(self.ignored, 0, np.floor(total + 0.5)).astype(np.int64)
        return out

    def normalize(self, scores: np.ndarray) -> np.ndarray:
        ignored = self.ignored if len(self.ignored) == len(scores) else np.zeros(len(scores), dtype=bool)
        valid = scores[~ignored]
        out = np.zeros(len(scores), dtype=np.int64)
        if not len(valid):
            return out
        top, low = max(int(valid.max()), 0), int(valid.min())
        if top == 0:
            out[~ignored] = MAX_NODE_SCORE
        else:
            out[~ignored] = MAX_NODE_SCORE * (top + low - valid) // top
        return out
