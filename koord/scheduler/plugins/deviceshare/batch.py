"""DeviceShare's batch forms of Filter and Score (``filter_nodes``, ``score_nodes``): one pass over the nodes
answering from each node's remembered verdicts and scores (:attr:`.nodedevice.NodeDevice.memo`) where the
pod's shape was worked out on the node as it is, and through the plugin's ``filter``/``score`` elsewhere, so
the answers are exactly the node-by-node ones. Pods of a steady GPU workload meet nodes whose devices did
not change since the last pod of their shape, so most nodes cost a dictionary lookup; the per-node calls
through the framework (and their per-node reads of the cycle state) are what this saves.

When a verdict may depend on more than the shape and the node (reservations restored on some node,
preemption's what-ifs, a designated allocation), every node goes through ``filter``/``score``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from koord.scheduler.framework import CycleState, NodeInfo, Obj
from koord.scheduler.plugins.deviceshare.cache import DeviceCache
from koord.scheduler.plugins.deviceshare.nodedevice import memo_key
from koord.scheduler.plugins.deviceshare.reservation import restore_state
from koord.scheduler.plugins.deviceshare.state import PodDeviceState

T = TypeVar("T")


def answers(
    kind: str,
    ps: PodDeviceState,
    generation: int,
    cache: DeviceCache,
    state: CycleState,
    pod: Obj,
    nodes: Sequence[NodeInfo],
    one: Callable[[CycleState, Obj, NodeInfo], T],
) -> list[T]:
    """``one(state, pod, node)`` for every node, from the memo where it holds the answer (``kind``: the
    memo's "filter" or "score"). Filter's checks made before the memo (a shared GPU on the node's model,
    the isolation provider) need not be repeated on a hit: they read only the node object and the pod's
    shape, both in the key, and a verdict is remembered only past them."""
    if ps.designated is not None or ps.preemptible or restore_state(state).nodes:
        return [one(state, pod, info) for info in nodes]
    out: list[T] = []
    devices = cache.get_many([info.name for info in nodes])
    for info, nd in zip(nodes, devices, strict=True):
        node = info.node
        if nd is not None and node is not None:
            with nd.lock:
                found = nd.memo.get(memo_key(kind, ps.signature, generation, node))
            if found is not None and found[0] is node:
                out.append(found[1])
                continue
        out.append(one(state, pod, info))
    return out
