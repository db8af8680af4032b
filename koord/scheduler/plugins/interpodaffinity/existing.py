"""What InterPodAffinity needs of the pods already placed, as snapshot columns recomputed only for nodes
that changed:

- the distinct terms existing pods carry (required/preferred, affinity/anti-affinity), learned from
  the nodes' pods with affinity as nodes change, and per term the number of pods (or, preferred, the
  sum of their weights) carrying it on each node: a cycle tests each distinct term against the
  incoming pod once, instead of every pod's terms;
- per term (or conjunction of terms) of the incoming pod, how many pods on each node match it;
- such per-node counts summed per topology domain (:data:`Counts`).

Terms no pod carries any more are forgotten when the list of known ones has doubled since last counted.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

import numpy as np

from koord.scheduler.framework import NodeInfo, Obj, PodInfo, Snapshot
from koord.scheduler.framework.snapshot import widened
from koord.scheduler.plugins.interpodaffinity.terms import NAME_PREFIX, AffinityTerm, terms_of

REQUIRED_AFFINITY, REQUIRED_ANTI, PREFERRED_AFFINITY, PREFERRED_ANTI = (
    "required",
    "requiredAnti",
    "preferred",
    "preferredAnti",
)
_MIN_KNOWN = 64
Counts = dict[str, np.ndarray]
"""Topology key -> matching pods per domain code."""
Column = tuple[Hashable, np.ndarray]
"""A derived snapshot column: its key and its values."""


def entries(info: PodInfo) -> Iterator[tuple[str, AffinityTerm, int]]:
    """``(kind, term, weight)`` for each term of the pod (weight 1 for required terms)."""
    t = terms_of(info)
    for term in t.required_affinity:
        yield REQUIRED_AFFINITY, term, 1
    for term in t.required_anti_affinity:
        yield REQUIRED_ANTI, term, 1
    for w, term in t.preferred_affinity:
        yield PREFERRED_AFFINITY, term, w
    for w, term in t.preferred_anti_affinity:
        yield PREFERRED_ANTI, term, w


class ExistingTerms:
    """The terms of existing pods, shared by every cycle of one plugin."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, AffinityTerm], None] = {}
        self._counted = 0

    def _learn(self, ni: NodeInfo) -> int:
        n = 0
        for info in ni.pods_with_affinity:
            for kind, term, _ in entries(info):
                self.known[(kind, term)] = None
                n += 1
        return n

    def refresh(self, snap: Snapshot) -> None:
        """Learn the terms on the nodes that changed since the last cycle."""
        # Keyed by this object: a second profile's plugin on the same snapshot learns on its own.
        snap.derived((NAME_PREFIX + "terms", id(self)), self._learn, np.int64)
        if len(self.known) > max(_MIN_KNOWN, 2 * self._counted):
            snap.refresh_affinity_lists()
            self.known = {}
            for ni in snap.with_affinity:
                self._learn(ni)
            self._counted = len(self.known)

    def of_kind(self, kind: str) -> list[AffinityTerm]:
        return [t for k, t in self.known if k == kind]

    @staticmethod
    def weights(snap: Snapshot, kind: str, term: AffinityTerm) -> Column:
        """Per row: the pods carrying ``term`` as ``kind`` (preferred: the sum of their weights)."""

        def weight(ni: NodeInfo) -> int:
            return sum(
                w for info in ni.pods_with_affinity for k, t, w in entries(info) if k == kind and t == term
            )

        key = (NAME_PREFIX + kind, term)
        return key, snap.derived(key, weight, np.int64, transient=True)


def pods_matching(snap: Snapshot, terms: tuple[AffinityTerm, ...]) -> Column:
    """Per row: the pods that match every one of ``terms`` (of the pod being scheduled, whose namespace
    selectors are resolved, so the pods' namespace labels are not needed)."""

    def count(ni: NodeInfo) -> int:
        return sum(1 for p in ni.pods.values() if all(t.matches(p.namespace, p.labels, None) for t in terms))

    key = (NAME_PREFIX + "matching", terms)
    return key, snap.derived(key, count, np.int64, transient=True)


def add_to_domains(counts: Counts, snap: Snapshot, key: str, column: Column, sign: int = 1) -> bool:
    """Add ``sign`` times the per-node ``column`` to the domains of ``key``; whether any pod counted
    (was on a node with the key)."""
    sums = snap.domain_sums(column[0], column[1], key)
    if not sums.any():
        return False
    have = counts.get(key)
    if have is None:
        counts[key] = sums * sign
    else:
        total = widened(have, len(sums))
        total[: len(sums)] += sign * sums
        counts[key] = total
    return True


def bump_domain(counts: Counts, snap: Snapshot, key: str, node: Obj, delta: int) -> None:
    """Add ``delta`` to the domain of ``key`` the node is in (preemption's what-ifs)."""
    value = ((node.get("metadata") or {}).get("labels") or {}).get(key)
    code = None if value is None else snap.topology(key)[1].get(value)
    if code is None:  # no such label, or a node the snapshot does not know: nothing counted there
        return
    have = widened(counts.get(key, np.zeros(0, dtype=np.int64)), code + 1)  # a copy: clones share arrays
    have[code] += delta
    counts[key] = have
