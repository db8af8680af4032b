"""InterPodAffinity's PreScore, Score and NormalizeScore (kube-scheduler's ``interpodaffinity/scoring.go``)
over the snapshot's arrays.

Every topology domain gets points: for each preferred affinity term of the incoming pod, its weight per
pod in the domain matching the term (anti-affinity: minus); for each existing pod, ``hardPodAffinityWeight``
per required affinity term, and the weight of each preferred (anti-)affinity term, that the incoming pod
matches, in that pod's domain. A node scores the points of its domains, one per topology key.
NormalizeScore maps the lowest to 0 and the highest to 100 (all 0 when they are equal). With
``ignorePreferredTermsOfExistingPods``, a pod without preferred terms of its own is not scored.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from koord.scheduler.framework import MAX_NODE_SCORE, NodeSet, Obj, Snapshot
from koord.scheduler.framework.snapshot import at_codes
from koord.scheduler.plugins.interpodaffinity.existing import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI,
    REQUIRED_AFFINITY,
    Counts,
    ExistingTerms,
    add_to_domains,
    pods_matching,
)
from koord.scheduler.plugins.interpodaffinity.terms import PodTerms


class ScoreState:
    __slots__ = ("points", "snapshot")

    def __init__(self, snapshot: Snapshot, points: Counts) -> None:
        self.snapshot = snapshot
        self.points = points

    @classmethod
    def build(
        cls,
        snap: Snapshot,
        pod: Obj,
        terms: PodTerms,
        namespace_labels: Mapping[str, str],
        known: ExistingTerms,
        hard_weight: int,
    ) -> ScoreState | None:
        """``None`` when no domain got points (kube-scheduler's PreScore Skip)."""
        points: Counts = {}
        touched = False
        for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for weight, term in weighted:
                touched |= add_to_domains(
                    points, snap, term.topology_key, pods_matching(snap, (term,)), sign * weight
                )
        for kind, factor in ((REQUIRED_AFFINITY, hard_weight), (PREFERRED_AFFINITY, 1), (PREFERRED_ANTI, -1)):
            if factor == 0:
                continue
            for term in known.of_kind(kind):
                if term.matches_pod(pod, namespace_labels):
                    touched |= add_to_domains(
                        points, snap, term.topology_key, known.weights(snap, kind, term), factor
                    )
        return cls(snap, points) if touched else None

    def scores(self, nodes: NodeSet) -> np.ndarray:
        total = np.zeros(len(nodes), dtype=np.int64)
        for key, per_domain_points in self.points.items():
            total += at_codes(per_domain_points, self.snapshot.topology_of(nodes, key))
        return total

    def normalize(self, scores: np.ndarray) -> np.ndarray:
        if not self.points or not len(scores):
            return scores
        low, high = int(scores.min()), int(scores.max())
        if high == low:
            return np.zeros(len(scores), dtype=np.int64)
        out: np.ndarray = (MAX_NODE_SCORE * ((scores - low) / (high - low))).astype(np.int64)
        return out
