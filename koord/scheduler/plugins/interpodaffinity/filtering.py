"""InterPodAffinity's PreFilter and Filter (kube-scheduler's ``interpodaffinity/filtering.go``) over the
snapshot's arrays.

PreFilter counts, per topology key, over the snapshot's domain codes:

- existing pods whose required anti-affinity terms match the incoming pod, in their nodes' domains;
- pods that match all the incoming pod's required affinity terms (each term counts in its own key);
- pods that match each of its required anti-affinity terms. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from koord.scheduler.framework import NodeSet, Obj, PodInfo, Snapshot, Status
from koord.scheduler.framework.snapshot import at_codes
from koord.scheduler.plugins.interpodaffinity.existing import (
    REQUIRED_ANTI,
    Counts,
    ExistingTerms,
    add_to_domains,
    bump_domain,
    pods_matching,
)
from koord.scheduler.plugins.interpodaffinity.terms import PodTerms, matches_all, terms_of

ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
FITS, AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY = 0, 1, 2, 3


class AffinityState:
    """What PreFilter computed for one pod; preemption's what-ifs change a clone of it."""

    __slots__ = ("affinity", "anti", "existing", "namespace_labels", "pod", "self_match", "snapshot", "terms")
    statuses = (
        None,
        Status.unresolvable(ERR_AFFINITY),
        Status.unschedulable(ERR_ANTI_AFFINITY),
        Status.unschedulable(ERR_EXISTING_ANTI_AFFINITY),
    )
    """Per verdict (:data:`FITS` ... :data:`EXISTING_ANTI_AFFINITY`): Filter's answer."""

    def __init__(
        self, snapshot: Snapshot, pod: Obj, terms: PodTerms, namespace_labels: Mapping[str, str]
    ) -> None:
        self.snapshot = snapshot
        self.pod = pod
        self.terms = terms
        self.namespace_labels = namespace_labels
        self.self_match = matches_all(terms.required_affinity, pod)
        self.existing: Counts = {}
        self.affinity: Counts = {}
        self.anti: Counts = {}

    @classmethod
    def build(
        cls,
        snap: Snapshot,
        pod: Obj,
        terms: PodTerms,
        namespace_labels: Mapping[str, str],
        known: ExistingTerms,
    ) -> AffinityState:
        s = cls(snap, pod, terms, namespace_labels)
        for term in known.of_kind(REQUIRED_ANTI):
            if term.matches_pod(pod, namespace_labels):
                add_to_domains(s.existing, snap, term.topology_key, known.weights(snap, REQUIRED_ANTI, term))
        if terms.required_affinity:
            matching = pods_matching(snap, terms.required_affinity)
            for term in terms.required_affinity:
                add_to_domains(s.affinity, snap, term.topology_key, matching)
        for term in terms.required_anti_affinity:
            add_to_domains(s.anti, snap, term.topology_key, pods_matching(snap, (term,)))
        return s

    @property
    def skippable(self) -> bool:
        """Nothing to check (kube-scheduler's PreFilter Skip)."""
        return (
            not self.existing and not self.terms.required_affinity and not self.terms.required_anti_affinity
        )

    def clone(self) -> AffinityState:
        out = AffinityState.__new__(AffinityState)
        out.snapshot, out.pod, out.terms = self.snapshot, self.pod, self.terms
        out.namespace_labels, out.self_match = self.namespace_labels, self.self_match
        out.existing, out.affinity, out.anti = dict(self.existing), dict(self.affinity), dict(self.anti)
        return out

    def verdicts(self, nodes: NodeSet) -> np.ndarray:
        """Per node: :data:`FITS` or the first rule it breaks."""
        out = np.full(len(nodes), FITS, dtype=np.int8)
        snap = self.snapshot
        if self.terms.required_affinity:
            has_keys = np.ones(len(nodes), dtype=bool)
            pods_exist = np.ones(len(nodes), dtype=bool)
            for term in self.terms.required_affinity:
                codes = snap.topology_of(nodes, term.topology_key)
                has_keys &= codes != -1
                pods_exist &= at_codes(self.affinity.get(term.topology_key, np.zeros(0, np.int64)), codes) > 0
            # The first pod of a group that has affinity to itself may go anywhere with the keys.
            first = self.self_match and not any(c.any() for c in self.affinity.values())
            out[~(has_keys & (pods_exist | first))] = AFFINITY
        for rule, counts in ((ANTI_AFFINITY, self.anti), (EXISTING_ANTI_AFFINITY, self.existing)):
            for key, per_domain_counts in counts.items():
                blocked = at_codes(per_domain_counts, snap.topology_of(nodes, key)) > 0
                out[(out == FITS) & blocked] = rule
        return out

    def update(self, other: PodInfo, node: Obj | None, delta: int) -> None:
        """``other`` added to (``delta`` 1) or removed from (-1) ``node``."""
        if node is None:
            return
        snap = self.snapshot
        for term in terms_of(other).required_anti_affinity:
            if term.matches_pod(self.pod, self.namespace_labels):
                bump_domain(self.existing, snap, term.topology_key, node, delta)
        if matches_all(self.terms.required_affinity, other.pod):
            for term in self.terms.required_affinity:
                bump_domain(self.affinity, snap, term.topology_key, node, delta)
        for term in self.terms.required_anti_affinity:
            if term.matches_pod(other.pod):
                bump_domain(self.anti, snap, term.topology_key, node, delta)
