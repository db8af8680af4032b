"""The descheduler's shared caches (Koordinator's shared informer factory): nodes, non-terminated pods
(indexed by node and by workload) and NodeMetrics, plus any cache a plugin asks for by name.

Objects are trimmed as the scheduler extender trims them (:mod:`koord.kube.trim`), except that
pods keep the kinds of their volumes (the evictor refuses local storage and, if asked, claims).
:class:`MemoryInformers` is the same set fed by hand, for tests, benchmarks and plugin authors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from koord.descheduler.framework.interface import Obj
from koord.descheduler.framework.pods import index_by_owner
from koord.kube.informer import Informer, index_by_node
from koord.kube.memstore import MemoryStore
from koord.kube.trim import compact, slim_node, slim_pod
from koord.runtime.lifecycle import Supervisor

NODEMETRICS = {"group": "slo.koordinator.sh", "version": "v1alpha1", "plural": "nodemetrics"}
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
POD_INDEXERS = {"node": index_by_node, "owner": index_by_owner}


def trim_pod(obj: Obj) -> Obj:
    return slim_pod(obj, keep_volume_kinds=True)


class SharedInformers:
    """List+watch caches on the official client; :meth:`start` runs every one created so far."""

    def __init__(
        self, api_client: Any, *, request_timeout: float = 10.0, watch_timeout: float = 300.0
    ) -> None:
        from kubernetes import client

        self._opts: dict[str, Any] = {"request_timeout": request_timeout, "watch_timeout": watch_timeout}
        core = client.CoreV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        self.nodes = Informer("nodes", core.list_node, transform=slim_node, **self._opts)
        self.pods = Informer(
            "pods",
            core.list_pod_for_all_namespaces,
            {"field_selector": POD_FIELD_SELECTOR},
            indexers=POD_INDEXERS,
            transform=trim_pod,
            **self._opts,
        )
        self.node_metrics = Informer(
            "nodemetrics", custom.list_cluster_custom_object, NODEMETRICS, transform=compact, **self._opts
        )
        self._all: dict[str, Informer] = {
            "nodes": self.nodes,
            "pods": self.pods,
            "nodemetrics": self.node_metrics,
        }
        self._lock = threading.Lock()
        self._started: tuple[threading.Event, Supervisor] | None = None

    def shared(
        self, name: str, list_fn: Callable[..., Any], kwargs: Mapping[str, Any] | None = None
    ) -> Informer:
        with self._lock:
            inf = self._all.get(name)
            if inf is None:
                inf = self._all[name] = Informer(name, list_fn, kwargs, transform=compact, **self._opts)
                if self._started is not None:
                    stop, supervisor = self._started
                    supervisor.go(f"informer-{name}", lambda: inf.run(stop))
            return inf

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None:
        with self._lock:
            self._started = (stop, supervisor)
            for name, inf in self._all.items():
                supervisor.go(f"informer-{name}", lambda inf=inf: inf.run(stop))  # type: ignore[misc]

    def has_synced(self) -> bool:
        with self._lock:
            return all(inf.has_synced() for inf in self._all.values())

    def close(self) -> None:
        with self._lock:
            for inf in self._all.values():
                inf.close()

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {name: len(inf) for name, inf in self._all.items()}


class MemoryInformers:
    """The same caches fed with :meth:`MemoryStore.put`/``remove`` (trimmed and indexed alike)."""

    def __init__(self, nodes: Any = (), pods: Any = (), node_metrics: Any = ()) -> None:
        self.nodes = MemoryStore(nodes, transform=slim_node, name="nodes")
        self.pods = MemoryStore(pods, indexers=POD_INDEXERS, transform=trim_pod, name="pods")
        self.node_metrics = MemoryStore(node_metrics, transform=compact, name="nodemetrics")
        self._shared: dict[str, MemoryStore] = {}

    def shared(
        self, name: str, list_fn: Callable[..., Any], kwargs: Mapping[str, Any] | None = None
    ) -> MemoryStore:
        store = self._shared.get(name)
        if store is None:
            store = self._shared[name] = MemoryStore(name=name)
        return store
