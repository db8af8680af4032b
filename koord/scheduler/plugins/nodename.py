"""NodeName (Filter): a pod that names a node (``spec.nodeName``) fits only there (kube-scheduler's
``nodename``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from koord.scheduler.framework import CycleState, NodeInfo, NodeSet, Obj, Status

NAME = "NodeName"
__all__ = ["NAME", "NodeName"]  # the built-in table loads the plugin by these names
ERR = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        if args:
            raise ValueError(f"takes no args, got {sorted(args)}")

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        want = (pod.get("spec") or {}).get("nodeName")
        return None if not want or want == node_info.name else Status.unresolvable(ERR)

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        want = (pod.get("spec") or {}).get("nodeName")
        if not want:
            return np.ones(len(nodes), dtype=bool)
        return np.fromiter((ni.name == want for ni in nodes), dtype=bool, count=len(nodes))
