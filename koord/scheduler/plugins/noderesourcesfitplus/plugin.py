"""NodeResourcesFitPlus (Score): each resource the pod requests and the args name is scored with its own
strategy, and the node's score is the weighted mean (Koordinator's ``resourceScorer``).

For a resource ``r`` with weight ``w``: ``requested`` is what the node's pods request plus what this pod
requests, ``allocatable`` the node's. ``MostAllocated``: ``min(requested, allocatable) * 100 //
allocatable``; ``LeastAllocated``: ``(allocatable - requested) * 100 // allocatable``, 0 when
``requested`` exceeds it; both 0 when the node has none. Node score: ``sum(score * w) // sum(w)``; 100
when the pod requests none of the named resources. Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koord.scheduler.framework import CycleState, NodeInfo, NodeSet, Obj, PodInfo, Status
from koord.scheduler.framework.types import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    EPHEMERAL,
    MEMORY,
    resources_of,
)
from koord.scheduler.plugins.noderesourcesfitplus.args import MOST, FitPlusArgs, parse_args
from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.core.resources import is_scalar_resource

NAME = "NodeResourcesFitPlus"
STATE_KEY = "PreScore" + NAME
MAX = 100


def scored_names(requests: Mapping[str, int]) -> list[str]:
    """The resources of a pod's requests a NodeInfo keeps (Koordinator's ``fitsPodRequestName``): cpu,
    memory, ephemeral storage and scalar resources, requested above zero."""
    return [
        n for n, v in requests.items() if v > 0 and (n in (CPU, MEMORY, EPHEMERAL) or is_scalar_resource(n))
    ]


def _non_zero(name: str, requests: Mapping[str, int]) -> int:
    """Koordinator's ``GetNonzeroRequestForResource``: cpu and memory default when not set (an explicit 0
    stays 0)."""
    if name == CPU:
        return requests.get(CPU, DEFAULT_MILLI_CPU_REQUEST)
    if name == MEMORY:
        return requests.get(MEMORY, DEFAULT_MEMORY_REQUEST)
    return requests.get(name, 0)


def pod_request(pod: Obj, name: str) -> int:
    """Koordinator's ``calculatePodResourceRequest``: the containers' (defaulted) requests and the
    sidecars', at least each regular init container's, plus the overhead. A rule of its own (defaults per
    container, no sidecar step), not Kubernetes' ``PodRequests`` (``koordshared.apis.core.resources``)."""
    spec = as_map(pod, "spec")
    total = sum(
        _non_zero(name, resources_of(as_map(as_map(c, "resources"), "requests")))
        for c in as_list(spec, "containers")
    )
    for c in as_list(spec, "initContainers"):
        value = _non_zero(name, resources_of(as_map(as_map(c, "resources"), "requests")))
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            total += value
        else:
            total = max(total, value)
    return total + resources_of(as_map(spec, "overhead")).get(name, 0)


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """The resources scored for this pod (requested and named in the args), and what it adds of each."""

    names: tuple[str, ...]
    adds: tuple[int, ...]


def _node_side(nodes: NodeSet, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(allocatable, requested)`` of ``name`` on each node; cpu and memory requested with the defaults."""
    snap, rows = nodes.snapshot, nodes.rows
    if snap is not None and rows is not None:
        col = snap.column(name)
        if name in (CPU, MEMORY):
            have = snap.non_zero[rows, 0 if name == CPU else 1]
        else:
            have = snap.requested[rows, col]
        return snap.allocatable[rows, col], have
    infos = nodes.infos
    alloc = np.asarray([ni.allocatable.get(name, 0) for ni in infos], dtype=np.int64)
    if name in (CPU, MEMORY):
        have = np.asarray([ni.non_zero_cpu if name == CPU else ni.non_zero_memory for ni in infos])
    else:
        have = np.asarray([ni.requested.get(name, 0) for ni in infos])
    return alloc, have.astype(np.int64)


class NodeResourcesFitPlus:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: FitPlusArgs = parse_args(args)

    def _state(self, state: CycleState, pod: Obj) -> PreScoreState:
        found = state.get(STATE_KEY)
        if isinstance(found, PreScoreState):
            return found
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        names = tuple(n for n in scored_names(info.requests) if n in self.args.resources)
        computed = PreScoreState(names, tuple(pod_request(pod, n) for n in names))
        state.write(STATE_KEY, computed)
        return computed

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        state.delete(STATE_KEY)
        self._state(state, pod)
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return int(self.score_nodes(state, pod, NodeSet(None, None, [node_info]))[0])

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        ps = self._state(state, pod)
        n = len(nodes)
        if not ps.names:
            return np.full(n, MAX, dtype=np.int64)
        total = np.zeros(n, dtype=np.int64)
        weights = 0
        for name, add in zip(ps.names, ps.adds, strict=True):
            spec = self.args.resources[name]
            alloc, have = _node_side(nodes, name)
            req = have + add
            safe = np.maximum(alloc, 1)
            if spec.type == MOST:
                scores = np.minimum(req, alloc) * MAX // safe
            else:
                scores = np.where(req > alloc, 0, (alloc - req) * MAX // safe)
            total += np.where(alloc > 0, scores, 0) * spec.weight
            weights += spec.weight
        return total // weights
