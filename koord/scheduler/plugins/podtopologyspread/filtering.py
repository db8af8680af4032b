"""PodTopologySpread's PreFilter and Filter (kube-scheduler's ``podtopologyspread/filtering.go``) over the
snapshot's arrays.

PreFilter counts, for each DoNotSchedule constraint, the matching pods per topology domain on every
node that has all the constraints' topology keys and passes the constraint's node inclusion policies:
an array over the snapshot's domain codes, plus which domains exist. Filter rejects a node without one
of the topology keys (unresolvable, "missing required label"), and one where
``pods in its domain + (1 if the pod matches the selector itself) - global minimum > maxSkew``; the
global minimum is the smallest count of an existing domain, or 0 while there are fewer domains than
``minDomains``. Constraints are checked in order; the first one that fails names the reason.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import numpy as np

from koord.scheduler.framework import NodeSet, Obj, PodInfo, Snapshot, Status
from koord.scheduler.framework.snapshot import at_codes, widened
from koord.scheduler.plugins.podtopologyspread.constraints import (
    Constraint,
    domains_of,
    included,
    node_included,
)
from koordshared.apis.core.node import labels_of

ERR_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
ERR_MISSING_LABEL = ERR_CONSTRAINTS + " (missing required label)"
FITS, MISSING_LABEL, SKEW = 0, 1, 2


class SpreadState:
    """What PreFilter computed for one pod; preemption's what-ifs change a clone of it."""

    __slots__ = ("constraints", "counts", "namespace", "pod", "present", "self_match", "snapshot")
    statuses = (None, Status.unresolvable(ERR_MISSING_LABEL), Status.unschedulable(ERR_CONSTRAINTS))
    """Per verdict (:data:`FITS`, :data:`MISSING_LABEL`, :data:`SKEW`): Filter's answer."""

    def __init__(self, snapshot: Snapshot, pod: Obj, constraints: tuple[Constraint, ...]) -> None:
        self.snapshot = snapshot
        self.pod = pod
        self.constraints = constraints
        self.namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        self.self_match = np.array([c.selector.matches(pod) for c in constraints], dtype=np.int64)
        self.counts: list[np.ndarray] = []
        self.present: list[np.ndarray] = []

    @classmethod
    def build(cls, snapshot: Snapshot, pod: Obj, constraints: tuple[Constraint, ...]) -> SpreadState:
        s = cls(snapshot, pod, constraints)
        columns = [snapshot.topology(c.topology_key) for c in constraints]
        has_all = np.logical_and.reduce([codes >= 0 for codes, _ in columns])
        every = bool(has_all.all())
        for c, (codes, table) in zip(constraints, columns, strict=True):
            mask = included(snapshot, pod, c)
            domains = None
            if mask is not None or not every:
                domains = np.where(has_all if mask is None else has_all & mask, codes, -1)
            counts, present = domains_of(
                snapshot, s.namespace, c.selector, c.topology_key, domains, len(table)
            )
            s.counts.append(counts)
            s.present.append(present)
        return s

    def clone(self) -> SpreadState:
        out = SpreadState.__new__(SpreadState)
        out.snapshot, out.pod, out.constraints = self.snapshot, self.pod, self.constraints
        out.namespace, out.self_match = self.namespace, self.self_match
        out.counts = [a.copy() for a in self.counts]
        out.present = [a.copy() for a in self.present]
        return out

    def min_match(self, i: int) -> int:
        present = self.present[i]
        if int(np.count_nonzero(present)) < self.constraints[i].min_domains:
            return 0
        return int(self.counts[i][present].min())

    def verdicts(self, nodes: NodeSet) -> np.ndarray:
        """Per node: :data:`FITS`, :data:`MISSING_LABEL` or :data:`SKEW`."""
        out = np.full(len(nodes), FITS, dtype=np.int8)
        undecided = np.ones(len(nodes), dtype=bool)
        for i, c in enumerate(self.constraints):
            codes = self.snapshot.topology_of(nodes, c.topology_key)
            missing = undecided & (codes == -1)
            out[missing] = MISSING_LABEL
            undecided &= ~missing
            skew = at_codes(self.counts[i], codes) + self.self_match[i] - self.min_match(i)
            over = undecided & (skew > c.max_skew)
            out[over] = SKEW
            undecided &= ~over
        return out

    def update(self, other: PodInfo, node: Obj | None, delta: int) -> None:
        """``other`` added to (``delta`` 1) or removed from (-1) ``node``."""
        if node is None or other.namespace != self.namespace:
            return
        labels = labels_of(node)
        if any(c.topology_key not in labels for c in self.constraints):
            return
        for i, c in enumerate(self.constraints):
            if not c.selector.matches(other.pod) or not node_included(self.pod, node, c):
                continue
            code = self.snapshot.topology(c.topology_key)[1].get(labels[c.topology_key])
            if code is None:  # a node the snapshot does not know: nothing counted there
                continue
            self.counts[i] = widened(self.counts[i], code + 1)
            self.present[i] = widened(self.present[i], code + 1)
            self.counts[i][code] += delta
            self.present[i][code] = True
