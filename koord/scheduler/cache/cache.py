"""The scheduler's cache (kube-scheduler's ``backend/cache``): nodes and the pods on them, fed by the
informers, plus the pods the scheduler has *assumed* on a node before the API server confirmed the binding.

An assumed pod counts on its node at once, so the next cycle does not place another pod into the room
it took; when the bound pod arrives from the informer it is confirmed (moved if it landed elsewhere),
and a failed binding forgets it. Assumed pods never expire (kube-scheduler's
``durationToExpireAssumedPod = 0``): a pod is forgotten only on a failure the scheduler saw itself, or
removed when its deletion arrives. :meth:`Cache.update_snapshot` brings a snapshot up to date with the
nodes changed since it was last updated, in the order they changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from koord.scheduler.cache.nodetree import NodeTree
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    assumed: bool = False
    binding_finished: bool = False


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class Cache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._generation = 0
        self._changed: OrderedDict[str, int] = OrderedDict()
        self._forgotten = 0
        """The newest generation of the change records dropped; an older snapshot is rebuilt whole."""
        self._tree = NodeTree()

    # ---- nodes ----------------------------------------------------------------------------------

    def add_node(self, node: Obj) -> None:
        with self._lock:
            name = _name(node)
            info = self._nodes.get(name)
            if info is None:
                info = self._nodes[name] = NodeInfo(name, node)
            else:
                info.set_node(node)
            self._tree.add(name, node)
            self._touch(info)

    def update_node(self, old: Obj, new: Obj) -> None:
        self.add_node(new)

    def remove_node(self, node: Obj) -> None:
        """The node leaves; its pods stay accounted (as kube-scheduler does) until their deletions
        arrive, on a NodeInfo without a node that no snapshot shows."""
        with self._lock:
            name = _name(node)
            self._tree.remove(name)
            info = self._nodes.get(name)
            if info is None:
                return
            if info.pods:
                info.node = None
                info.memo = {}
                self._touch(info)
            else:
                del self._nodes[name]
                self._generation += 1
                self._changed[name] = self._generation
                self._changed.move_to_end(name)

    def node_names(self) -> list[str]:
        with self._lock:
            return [n for n, info in self._nodes.items() if info.node is not None]

    def has_node(self, name: str) -> bool:
        """Whether the Node object is known (its pods may outlive it here, the node itself not)."""
        with self._lock:
            info = self._nodes.get(name)
            return info is not None and info.node is not None

    # ---- pods -----------------------------------------------------------------------------------

    def add_pod(self, pod: Obj) -> None:
        """A bound pod from the informer: confirms an assumed pod (moving it if it landed elsewhere)."""
        info = PodInfo(pod)
        if not info.node_name:
            return
        with self._lock:
            state = self._pods.get(info.uid)
            if state is not None:
                self._remove_locked(state)
            self._add_locked(_PodState(info, info.node_name))

    def update_pod(self, old: Obj, new: Obj) -> None:
        self.add_pod(new)

    def remove_pod(self, pod: Obj) -> None:
        uid = PodInfo(pod).uid
        with self._lock:
            state = self._pods.pop(uid, None)
            if state is not None:
                self._remove_locked(state)

    def assume_pod(self, info: PodInfo, node: str) -> None:
        """Count ``info`` on ``node`` before the binding is confirmed (``info.node_name`` may be empty:
        the pod object is the pending one)."""
        with self._lock:
            if info.uid in self._pods:
                raise ValueError(f"pod {info.key} is already in the cache")
            self._add_locked(_PodState(info, node, assumed=True))

    def finish_binding(self, uid: str) -> None:
        with self._lock:
            state = self._pods.get(uid)
            if state is not None and state.assumed:
                state.binding_finished = True

    def forget_pod(self, uid: str) -> str:
        """Undo :meth:`assume_pod` (the binding failed or was given up): the node it was assumed on, or
        ``""`` when the pod is not assumed any more (confirmed meanwhile: then it is bound and stays)."""
        with self._lock:
            state = self._pods.get(uid)
            if state is None or not state.assumed:
                return ""
            del self._pods[uid]
            self._remove_locked(state)
            return state.node

    def is_assumed(self, uid: str) -> bool:
        with self._lock:
            state = self._pods.get(uid)
            return state is not None and state.assumed

    def counts(self) -> tuple[int, int, int]:
        """(nodes, pods, assumed pods)."""
        with self._lock:
            nodes = sum(1 for i in self._nodes.values() if i.node is not None)
            return nodes, len(self._pods), sum(1 for s in self._pods.values() if s.assumed)

    def _add_locked(self, state: _PodState) -> None:
        self._pods[state.info.uid] = state
        info = self._nodes.get(state.node)
        if info is None:
            info = self._nodes[state.node] = NodeInfo(state.node, None)
        info.add_pod(state.info)
        self._touch(info)

    def _remove_locked(self, state: _PodState) -> None:
        info = self._nodes.get(state.node)
        if info is None:
            return
        info.remove_pod(state.info.uid)
        if info.node is None and not info.pods:
            del self._nodes[state.node]
            self._generation += 1
            self._changed[state.node] = self._generation
            self._changed.move_to_end(state.node)
        else:
            self._touch(info)

    def _touch(self, info: NodeInfo) -> None:
        self._generation += 1
        info.generation = self._generation
        self._changed[info.name] = self._generation
        self._changed.move_to_end(info.name)

    # ---- snapshots ------------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot, *, hold: bool = False) -> int:
        """Bring ``snapshot`` to the cache's state; the number of nodes it had to copy. Rows a plugin
        changed for the last cycle get their NodeInfos back first (Koordinator's ``InvalidNodeInfo``);
        with ``hold``, only once the caller calls ``snapshot.settle()`` (:meth:`Snapshot.put_back`)."""
        copied = 0
        snapshot.put_back(hold=hold)
        with self._lock:
            if snapshot.generation >= self._generation:
                return 0
            if snapshot.generation < self._forgotten:
                for name in [
                    n for n in snapshot.index if n not in self._nodes or self._nodes[n].node is None
                ]:
                    snapshot.remove(name)
                for info in self._nodes.values():
                    if info.node is not None:
                        snapshot.set(info.clone())
                        copied += 1
                snapshot.generation = self._generation
                snapshot.set_search_order(self._tree.names(), self._tree.version)
                return copied
            for name, gen in reversed(self._changed.items()):
                if gen <= snapshot.generation:
                    break
                changed = self._nodes.get(name)
                if changed is None or changed.node is None:
                    snapshot.remove(name)
                else:
                    snapshot.set(changed.clone())
                copied += 1
            snapshot.generation = self._generation
            snapshot.set_search_order(self._tree.names(), self._tree.version)
            # Entries every snapshot has seen are not needed any more; a snapshot only ever moves forward.
            while len(self._changed) > 2 * max(len(self._nodes), 64):
                _, gen = self._changed.popitem(last=False)
                self._forgotten = max(self._forgotten, gen)
        return copied
