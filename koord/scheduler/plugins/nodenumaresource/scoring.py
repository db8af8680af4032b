"""NodeNUMAResource's resource scorers (Koordinator's ``scoring.go``, ``least_allocated.go``,
``most_allocated.go``): LeastAllocated or MostAllocated over weighted resources, for a node (its requests
as counted by the scheduler, not the non-zero defaults), for the NUMA nodes a pod would get
(:func:`.placementscore.numa_score`), and for each NUMA hint.

For each weighted resource the allocatable has: requested plus the pod's request against allocatable,
``(allocatable - requested) * 100 / allocatable`` (LeastAllocated, 0 when over) or ``min(requested,
allocatable) * 100 / allocatable`` (MostAllocated), averaged by weight; a scalar resource (extended, huge
pages) the pod does not request is left out. The node-level form runs over many nodes at once with
NodeResourcesFit's arrays (:mod:`koord.scheduler.plugins.noderesources.scoring`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from koord.scheduler.framework import NodeSet, PodInfo
from koord.scheduler.plugins.nodenumaresource.args import ScoringStrategy
from koord.scheduler.plugins.noderesources.args import MOST
from koord.scheduler.plugins.noderesources.scoring import least_allocated, matrices, most_allocated

MAX = 100
_NOT_SCALAR = ("cpu", "memory", "ephemeral-storage")


class Scorer:
    def __init__(self, strategy: ScoringStrategy) -> None:
        self.most = strategy.type == MOST
        self.resources = strategy.resources
        self.names = [n for n, _ in strategy.resources]
        self.weights = np.asarray([w for _, w in strategy.resources], dtype=np.int64)

    def score(
        self, requested: Mapping[str, int], allocatable: Mapping[str, int], pod: Mapping[str, int]
    ) -> int:
        total = weights = 0
        for name, weight in self.resources:
            want = pod.get(name, 0)
            if want == 0 and name not in _NOT_SCALAR:
                continue
            alloc = allocatable.get(name, 0)
            if alloc == 0:
                continue
            req = requested.get(name, 0) + want
            if self.most:
                s = min(req, alloc) * MAX // alloc
            else:
                s = 0 if req > alloc else (alloc - req) * MAX // alloc
            total += s * weight
            weights += weight
        return total // weights if weights else 0

    def score_nodes(self, nodes: NodeSet, pod: PodInfo) -> np.ndarray:
        """The node-level score of ``pod`` on each of ``nodes``."""
        req, alloc = matrices(nodes, pod, self.names, use_requested=True)
        fn = most_allocated if self.most else least_allocated
        return fn(req, alloc, self.weights)
