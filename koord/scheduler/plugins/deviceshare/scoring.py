"""How DeviceShare scores a device or a node's devices (Koordinator's ``resourceAllocationScorer``).

For each resource of the strategy the device (or the node, all its devices of the type summed) has:
``requested = total - free + request`` (``total`` when free exceeds total), then kube-scheduler's
LeastAllocated ``(total - requested) * 100 // total`` (0 above total) or MostAllocated
``min(requested, total) * 100 // total``; the score is the weighted mean, integer-divided. Resources the
device does not have are left out; none left: 0. A node's DeviceShare score is the sum over the device types
the pod asks for, normalised across nodes (the highest becomes 100).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

MAX = 100


@dataclass(frozen=True, slots=True)
class Scorer:
    most_allocated: bool
    weights: Mapping[str, int]

    def score_device(
        self, request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]
    ) -> int:
        score = weight_sum = 0
        for name, weight in self.weights.items():
            cap = total.get(name, 0)
            if cap == 0:
                continue
            left = free.get(name, 0)
            req = cap - left + request.get(name, 0) if cap >= left else cap
            if self.most_allocated:
                s = min(req, cap) * MAX // cap
            else:
                s = 0 if req > cap else (cap - req) * MAX // cap
            score += s * weight
            weight_sum += weight
        return score // weight_sum if weight_sum else 0

    def score_node(
        self,
        request: Mapping[str, int],
        total: Mapping[int, Mapping[str, int]],
        free: Mapping[int, Mapping[str, int]],
    ) -> int:
        summed_total = {n: sum(d.get(n, 0) for d in total.values()) for n in self.weights}
        summed_free = {n: sum(d.get(n, 0) for d in free.values()) for n in self.weights}
        return self.score_device(request, summed_total, summed_free)


def normalize(scores: np.ndarray) -> np.ndarray:
    """kube-scheduler's ``DefaultNormalizeScore(100, false)``: scaled so the highest is 100 (all 0 stay 0)."""
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return scores
    out: np.ndarray = scores * MAX // top
    return out
