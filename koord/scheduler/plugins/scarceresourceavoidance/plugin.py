"""ScarceResourceAvoidance (Score): a node scores lower the more of the resources it has, but the pod does
not ask for, are scarce (Koordinator's ``Score``).

``have``: the resources the node has (allocatable above zero: cpu, memory, ephemeral storage and scalar
resources; not ``pods``); ``unused = have - what the pod requests`` (above zero);
``scarce = unused & args.resources``. Score: 100 when ``unused`` or ``scarce`` is empty, else
``(len(unused) - len(scarce)) * 100 // len(unused)``. A GPU node therefore scores lower for a CPU-only
pod than a node without GPUs, and 100 for a pod that asks for its GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koord.scheduler.framework import CycleState, NodeInfo, NodeSet, Obj, PodInfo, Status
from koord.scheduler.framework.types import CPU, EPHEMERAL, MEMORY
from koord.scheduler.plugins.scarceresourceavoidance.args import ScarceArgs, parse_args
from koordshared.apis.core.resources import is_scalar_resource

NAME = "ScarceResourceAvoidance"
STATE_KEY = "PreScore" + NAME
MAX = 100


def counted(name: str) -> bool:
    """The resources a NodeInfo keeps by name: cpu, memory, ephemeral storage and scalar resources."""
    return name in (CPU, MEMORY, EPHEMERAL) or is_scalar_resource(name)


def node_resources(ni: NodeInfo) -> frozenset[str]:
    """What the node has (allocatable above zero)."""
    return frozenset(n for n, v in ni.allocatable.items() if v > 0 and counted(n))


def score_of(have: frozenset[str], wanted: frozenset[str], scarce: frozenset[str]) -> int:
    unused = have - wanted
    avoided = unused & scarce
    if not unused or not avoided:
        return MAX
    return (len(unused) - len(avoided)) * MAX // len(unused)


class ScarceResourceAvoidance:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: ScarceArgs = parse_args(args)
        self.scarce = frozenset(n for n in self.args.resources if counted(n))

    def _wanted(self, state: CycleState, pod: Obj) -> frozenset[str]:
        found = state.get(STATE_KEY)
        if isinstance(found, frozenset):
            return found
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        wanted = frozenset(n for n, v in info.requests.items() if v > 0 and counted(n))
        state.write(STATE_KEY, wanted)
        return wanted

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        state.delete(STATE_KEY)
        self._wanted(state, pod)
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return score_of(node_resources(node_info), self._wanted(state, pod), self.scarce)

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        """The counts from the snapshot's arrays: ``len(unused)`` is what the node has less the wanted
        resources it has; ``len(scarce)`` the scarce ones it has less the wanted scarce ones."""
        wanted = self._wanted(state, pod)
        snap, rows = nodes.snapshot, nodes.rows
        if snap is None or rows is None or not self.scarce:
            return np.fromiter((self.score(state, pod, ni) for ni in nodes), dtype=np.int64, count=len(nodes))
        have = nodes.column(f"{NAME}/resources", lambda ni: len(node_resources(ni)), np.int64)
        assert have is not None

        def has(names: frozenset[str]) -> np.ndarray:
            out = np.zeros(len(rows), dtype=np.int64)
            for name in sorted(names):
                out += snap.allocatable[rows, snap.column(name)] > 0
            return out

        unused = have - has(wanted)
        avoided = has(self.scarce - wanted)
        safe = np.maximum(unused, 1)
        return np.where((unused == 0) | (avoided == 0), MAX, (unused - avoided) * MAX // safe)
