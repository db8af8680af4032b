"""Pods nominated to a node (kube-scheduler's ``PodNominator``): pending pods whose
``status.nominatedNodeName`` (set when they preempted others there) reserves room on that node for them.

While a preemptor waits for its victims to leave, the node's freed room must not go to a pod of lower
priority: the cycle filters a node with nominated pods of equal or higher priority than the pod being
scheduled twice, with them counted on the node and without
(:meth:`.runtime.Framework.filter_with_nominated_pods`).
The scheduler keeps the nominator in step with the informer (pending pods added, updated, deleted), with
its own decisions (a nomination PostFilter made, before the API server has it) and with assumed pods
(no longer nominated). When no pod is nominated anywhere, :meth:`Nominator.for_pod` and
:meth:`Nominator.ahead_on` cost one check.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from koord.scheduler.framework.types import Obj, PodInfo

_NONE: Mapping[str, list[PodInfo]] = {}


def nominated_node_name(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


class Nominator:
    """Node -> the pods nominated to it, safe to use from the informer's and the scheduler's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, info: PodInfo, node: str | None = None) -> None:
        """Nominate the pod to ``node`` (``None``: the node its ``status.nominatedNodeName`` names; ``""``:
        to no node), replacing any nomination it had."""
        target = nominated_node_name(info.pod) if node is None else node
        with self._lock:
            self._delete_locked(info.uid)
            if target:
                self._by_node.setdefault(target, {})[info.uid] = info
                self._node_of[info.uid] = target

    def update(self, old: Obj, new: Obj) -> None:
        """A pending pod changed. A nomination the scheduler made and the update does not carry yet (the
        status write is on its way) is kept, as kube-scheduler keeps it."""
        uid = PodInfo.uid_of(new)
        old_node, new_node = nominated_node_name(old), nominated_node_name(new)
        if not old_node and not new_node:
            if uid not in self._node_of:
                return  # the common case: never nominated
            with self._lock:
                kept = self._node_of.get(uid, "")
            self.add(PodInfo(new), kept)
            return
        self.add(PodInfo(new))

    def delete(self, uid: str) -> None:
        if uid not in self._node_of:
            return
        with self._lock:
            self._delete_locked(uid)

    def _delete_locked(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._by_node[node]

    def pods_for_node(self, node: str) -> list[PodInfo]:
        with self._lock:
            return list(self._by_node.get(node, {}).values())

    def ahead_on(self, info: PodInfo, node: str) -> list[PodInfo]:
        """The pods nominated to ``node`` that ``info`` must make room for (kube-scheduler's
        ``NominatedPodsForNode`` filtered by priority): one node's, so a preemption dry run filtering a
        hundred nodes does not walk every nomination for each."""
        if not self._by_node:
            return []
        with self._lock:
            pods = self._by_node.get(node)
            if not pods:
                return []
            return [p for p in pods.values() if p.priority >= info.priority and p.uid != info.uid]

    def for_pod(self, info: PodInfo) -> Mapping[str, list[PodInfo]]:
        """Node -> the pods nominated there that ``info`` must make room for: other pods of its priority
        or higher. Empty (at the cost of one check) when nothing is nominated anywhere."""
        if not self._by_node:
            return _NONE
        out: dict[str, list[PodInfo]] = {}
        with self._lock:
            for node, pods in self._by_node.items():
                ahead = [p for p in pods.values() if p.priority >= info.priority and p.uid != info.uid]
                if ahead:
                    out[node] = ahead
        return out

    def __len__(self) -> int:
        return len(self._node_of)
