"""The cluster view the extender hands its plugins: the framework ``Handle`` over three caches (nodes,
pods, NodeMetrics) and the informers that fill them.

Cached objects are trimmed by :mod:`koord.kube.trim` (pods lose ``spec.volumes``, managedFields,
most container and status fields; every key and short string is interned). Terminated pods are not
cached at all (field selector), so a pod that ends leaves the caches as a delete.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from koord.kube.informer import EventHandler
from koord.kube.informers import InformerSet, cluster_watches
from koord.kube.trim import compact, slim_node, slim_pod
from koord.scheduler.framework import NodeInfo, Obj
from koord.scheduler.framework.interface import ObjHandler, UpdateHandler

__all__ = [
    "ClusterHandle",
    "Store",
    "build_informers",
    "compact",
    "slim_node",
    "slim_pod",
]


class Store(Protocol):
    """What the handle needs of a cache; :class:`~koord.kube.informer.Informer` is one."""

    def get(self, key: str) -> Obj | None: ...

    def objects(self) -> list[Obj]: ...

    def by_index(self, index: str, value: str) -> list[Obj]: ...

    def add_handler(self, handler: EventHandler) -> None: ...

    def has_synced(self) -> bool: ...

    def __len__(self) -> int: ...


class ClusterHandle:
    """The framework's ``Handle`` over a node, a pod and a NodeMetric store (informers in the process,
    :class:`~koord.kube.memstore.MemoryStore` in tests and benchmarks). The pod store must
    carry the ``node`` index (``index_by_node``)."""

    def __init__(
        self, nodes: Store, pods: Store, node_metrics: Store, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.nodes, self.pods, self.node_metrics = nodes, pods, node_metrics
        self._clock = clock
        self._lock = threading.Lock()
        self._infos: dict[str, NodeInfo] = {}
        nodes.add_handler(
            EventHandler(on_add=self._node_set, on_update=self._node_update, on_delete=self._node_del)
        )

    def _node_set(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        info = NodeInfo(name, obj)
        with self._lock:
            self._infos[name] = info

    def _node_update(self, old: Obj, new: Obj) -> None:
        if old is not new:  # a resync replays the same object: keep the memo
            self._node_set(new)

    def _node_del(self, obj: Obj) -> None:
        with self._lock:
            self._infos.pop(str((obj.get("metadata") or {}).get("name") or ""), None)

    # ---- the framework Handle ---------------------------------------------------------------------

    def node_info(self, name: str) -> NodeInfo | None:
        return self._infos.get(name)

    def node_infos(self) -> Sequence[NodeInfo]:
        with self._lock:
            return list(self._infos.values())

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self.pods.get(f"{namespace}/{name}" if namespace else name)

    def pods_on_node(self, node_name: str) -> list[Obj]:
        return self.pods.by_index("node", node_name)

    def node_metric(self, node_name: str) -> Obj | None:
        return self.node_metrics.get(node_name)

    def on_pods(
        self,
        on_add: ObjHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: ObjHandler | None = None,
    ) -> None:
        self.pods.add_handler(EventHandler(on_add, on_update, on_delete))

    def on_node_metrics(
        self,
        on_add: ObjHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: ObjHandler | None = None,
    ) -> None:
        self.node_metrics.add_handler(EventHandler(on_add, on_update, on_delete))

    def now(self) -> float:
        return self._clock()

    # ---- the extender's own needs -----------------------------------------------------------------

    def has_synced(self) -> bool:
        return self.nodes.has_synced() and self.pods.has_synced() and self.node_metrics.has_synced()


def build_informers(api_client: Any) -> InformerSet:
    """Nodes, non-terminated pods (with the ``node`` index) and NodeMetrics, each trimmed as documented
    (the caches every cluster process builds the same way, :mod:`koord.kube.informers`)."""
    return InformerSet(api_client, cluster_watches())
