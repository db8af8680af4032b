"""The cluster view the extender hands its plugins: koord-scheduler's own :class:`~koord.scheduler.cache.
cache.Cache` and :class:`~koord.scheduler.framework.snapshot.Snapshot`, fed by the node and pod informers,
behind the framework ``Handle``.

The informers fill the cache as koord-scheduler's event handlers do, without a queue: nodes, and the pods
bound to a node (a pending pod is the one kube-scheduler asks about, never cached as placed). ``/bind``
assumes the pod on its node before the binding POST and forgets it when the POST fails, so the next
``/filter`` counts it at once. Each verb brings the snapshot up to date under :meth:`ExtenderHandle.cycle`
and reads only the snapshot while it runs: batch plugins see NodeSets with snapshot rows, as in
koord-scheduler. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from koord.scheduler.cache.cache import Cache
from koord.scheduler.framework import NodeInfo, Obj, PodInfo
from koord.scheduler.framework.interface import ObjHandler, UpdateHandler
from koord.scheduler.framework.snapshot import Snapshot
from koordshared.apis.core.pod import pod_uid
from koordshared.kube.informer import EventHandler
from koordshared.kube.informers import InformerSet, Watch, cluster_watches


class Store(Protocol):
    """What the handle needs of a cache; :class:`~koordshared.kube.informer.Informer` is one."""

    def get(self, key: str) -> Obj | None: ...

    def add_handler(self, handler: EventHandler) -> None: ...

    def has_synced(self) -> bool: ...

    def __len__(self) -> int: ...


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class ExtenderHandle:
    """The framework's ``Handle`` over a node, a pod and a NodeMetric store (informers in the process,
    :class:`~koordshared.kube.memstore.MemoryStore` in tests and benchmarks): node views from the snapshot,
    pods and NodeMetrics by name from their stores."""

    def __init__(
        self, nodes: Store, pods: Store, node_metrics: Store, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.nodes, self.pods, self.node_metrics = nodes, pods, node_metrics
        self.cache = Cache()
        self._snapshot = Snapshot()
        self._clock = clock
        self._cycle = threading.Lock()
        cache = self.cache
        nodes.add_handler(EventHandler(cache.add_node, self._node_updated, cache.remove_node))
        pods.add_handler(EventHandler(self._pod_added, self._pod_updated, self._pod_deleted))

    # ---- informer events into the cache (koord-scheduler's handlers, without the queue) ---------------

    def _node_updated(self, old: Obj, new: Obj) -> None:
        if old is not new:  # a resync replays the same object: the snapshot keeps its rows
            self.cache.update_node(old, new)

    def _pod_added(self, pod: Obj) -> None:
        if _assigned(pod):
            self.cache.add_pod(pod)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old is new:  # a resync replays the same object: nothing changed
            return
        if _assigned(new):
            self.cache.update_pod(old, new)  # confirms the pod /bind assumed
        elif _assigned(old):
            self.cache.remove_pod(old)

    def _pod_deleted(self, pod: Obj) -> None:
        # A pod deleted between /bind and the informer's view of the binding arrives unassigned: the
        # cache holds it assumed, and would hold it for good.
        if _assigned(pod) or self.cache.is_assumed(pod_uid(pod)):
            self.cache.remove_pod(pod)

    # ---- the verbs' view ------------------------------------------------------------------------

    @contextmanager
    def cycle(self) -> Iterator[Snapshot]:
        """The snapshot, brought up to date with the cache and held still while the block runs (one verb
        at a time reads it; informer events keep arriving into the cache)."""
        with self._cycle:
            self.cache.update_snapshot(self._snapshot)
            yield self._snapshot

    def assume(self, pod_info: PodInfo, node: str) -> bool:
        """Count the pod on ``node`` until the informer confirms the binding; False when the cache has it
        already (bound, or assumed by an earlier ``/bind``), which leaves nothing to forget."""
        try:
            self.cache.assume_pod(pod_info, node)
        except ValueError:
            return False
        return True

    def forget(self, pod_info: PodInfo) -> None:
        self.cache.forget_pod(pod_info.uid)

    def finish_binding(self, pod_info: PodInfo) -> None:
        self.cache.finish_binding(pod_info.uid)

    # ---- the framework Handle ---------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return self._snapshot

    def node_info(self, name: str) -> NodeInfo | None:
        return self._snapshot.node_info(name)

    def node_infos(self) -> Sequence[NodeInfo]:
        return self._snapshot.node_infos()

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self.pods.get(f"{namespace}/{name}" if namespace else name)

    def pods_on_node(self, node_name: str) -> list[Obj]:
        """The pods the snapshot counts on the node (bound, and assumed by ``/bind``)."""
        info = self._snapshot.node_info(node_name)
        return [] if info is None else [p.pod for p in info.pods.values()]

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

    def sizes(self) -> dict[str, int]:
        nodes = self.cache.counts()[0]
        return {"nodes": nodes, "pods": len(self.pods), "nodemetrics": len(self.node_metrics)}


def extender_watches() -> tuple[Watch, Watch, Watch]:
    """Nodes, non-terminated pods and NodeMetrics (parsed), trimmed as koord-scheduler trims them; the
    pods carry no node index here, since the cache holds the pods of each node."""
    nodes, pods, metrics = cluster_watches(parse_node_metrics=True)
    return nodes, Watch(pods.name, pods.resource, pods.field_selector, transform=pods.transform), metrics


def build_informers(api_client: Any) -> InformerSet:
    return InformerSet(api_client, extender_watches())
