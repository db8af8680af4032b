"""The resource scores of kube-scheduler's ``noderesources`` (``resource_allocation.go``,
``least_allocated.go``, ``most_allocated.go``, ``requested_to_capacity_ratio.go``,
``balanced_allocation.go``), over many nodes at once.

For each configured resource a node has (allocatable > 0), ``requested`` is what its pods request plus
the incoming pod's request; for scoring cpu and memory kube-scheduler counts a container without a
request as 100m / 200 MB (``non_zero``); BalancedAllocation counts requests as they are. An extended
resource the pod does not request is left out. Integer arithmetic as in Go (``//`` where Go divides
int64s).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from koord.scheduler.framework import NodeSet, PodInfo
from koord.scheduler.framework.types import CPU, EPHEMERAL, MEMORY, PODS

MAX = 100
NATIVE = (CPU, MEMORY, EPHEMERAL, PODS)


def matrices(
    nodes: NodeSet, pod: PodInfo, resources: Sequence[str], *, use_requested: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(requested, allocatable)``, shape ``(len(resources), len(nodes))``; a resource left out is all
    zero (then it counts for no node)."""
    k, n = len(resources), len(nodes)
    req = np.zeros((k, n), dtype=np.int64)
    alloc = np.zeros((k, n), dtype=np.int64)
    snap, rows = nodes.snapshot, nodes.rows
    for i, name in enumerate(resources):
        want = pod.requests.get(name, 0)
        if name not in NATIVE and want == 0:
            continue
        nz = not use_requested and name in (CPU, MEMORY)
        if nz:
            want = pod.non_zero_cpu if name == CPU else pod.non_zero_memory
        if snap is not None and rows is not None:
            col = snap.column(name)
            alloc[i] = snap.allocatable[rows, col]
            have = snap.non_zero[rows, 0 if name == CPU else 1] if nz else snap.requested[rows, col]
        else:
            infos = nodes.infos
            alloc[i] = [ni.allocatable.get(name, 0) for ni in infos]
            if nz:
                have = np.asarray([ni.non_zero_cpu if name == CPU else ni.non_zero_memory for ni in infos])
            else:
                have = np.asarray([ni.requested.get(name, 0) for ni in infos])
        req[i] = have + want
    return req, alloc


def _weighted(scores: np.ndarray, valid: np.ndarray, weights: np.ndarray) -> np.ndarray:
    w = valid * weights[:, None]
    total = (scores * w).sum(axis=0)
    wsum = w.sum(axis=0)
    return np.where(wsum > 0, total // np.maximum(wsum, 1), 0)


def least_allocated(req: np.ndarray, alloc: np.ndarray, weights: np.ndarray) -> np.ndarray:
    safe = np.maximum(alloc, 1)
    scores = np.where(req > alloc, 0, (alloc - req) * MAX // safe)
    return _weighted(scores, alloc > 0, weights)


def most_allocated(req: np.ndarray, alloc: np.ndarray, weights: np.ndarray) -> np.ndarray:
    safe = np.maximum(alloc, 1)
    scores = np.minimum(req, alloc) * MAX // safe
    return _weighted(scores, alloc > 0, weights)


def broken_linear(shape: Sequence[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    """kube-scheduler's ``buildBrokenLinearFunction`` over utilizations ``p`` (scores already x10)."""
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(shape):
        here = ~done & (p <= u)
        if i == 0:
            out[here] = s
        else:
            u0, s0 = shape[i - 1]
            # Go's int64 division truncates toward zero (the slope may be negative).
            num = (s - s0) * (p[here] - u0)
            out[here] = s0 + np.trunc(num / (u - u0)).astype(np.int64)
        done |= here
    return out


def requested_to_capacity_ratio(
    req: np.ndarray, alloc: np.ndarray, weights: np.ndarray, shape: Sequence[tuple[int, int]]
) -> np.ndarray:
    scaled = [(u, s * MAX // 10) for u, s in shape]
    safe = np.maximum(alloc, 1)
    util = np.where((alloc == 0) | (req > alloc), MAX, req * MAX // safe)
    scores = broken_linear(scaled, util)
    counted = (alloc > 0) & (scores > 0)  # kube-scheduler counts a resource only when it scores above 0
    w = counted * weights[:, None]
    wsum = w.sum(axis=0)
    total = (scores * w).sum(axis=0)
    # Go's math.Round: halves away from zero (numpy rounds them to even); every value here is >= 0.
    return np.where(wsum > 0, np.floor(total / np.maximum(wsum, 1) + 0.5), 0).astype(np.int64)


def balanced(req: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    """``(1 - std) * 100`` of the requested fractions (each capped at 1), truncated as Go's int64()."""
    valid = alloc > 0
    if len(req) == 2 and valid.all():
        # The common case (cpu and memory, both allocatable everywhere) without the general path's masks,
        # sort and gathers: the same formula.
        f = np.minimum(req / alloc, 1.0)
        two: np.ndarray = ((1 - np.abs((f[0] - f[1]) / 2)) * MAX).astype(np.int64)
        return two
    frac = np.where(valid, np.minimum(req / np.maximum(alloc, 1), 1.0), 0.0)
    count = valid.sum(axis=0)
    std = np.zeros(req.shape[1])
    two = count == 2
    if two.any():
        # Only two fractions: |f1 - f2| / 2 exactly as kube-scheduler computes it.
        first = np.where(valid, frac, np.nan)
        ordered = np.sort(np.where(valid, np.arange(len(req))[:, None], len(req)), axis=0)
        idx0, idx1 = ordered[0], ordered[1]
        cols = np.arange(req.shape[1])
        a = first[np.minimum(idx0, len(req) - 1), cols]
        b = first[np.minimum(idx1, len(req) - 1), cols]
        std = np.where(two, np.abs((a - b) / 2), std)
    many = count > 2
    if many.any():
        mean = frac.sum(axis=0) / np.maximum(count, 1)
        var = (((frac - mean) ** 2) * valid).sum(axis=0) / np.maximum(count, 1)
        std = np.where(many, np.sqrt(var), std)
    return ((1 - std) * MAX).astype(np.int64)
