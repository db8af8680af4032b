"""The descheduler's shared caches (Koordinator's shared informer factory): nodes, non-terminated pods
(indexed by node and by workload) and NodeMetrics, plus any cache a plugin asks for by name.

Built as every cluster process builds its caches (:mod:`koordshared.kube.informers`), with pods keeping the
kinds of their volumes (the evictor refuses local storage and, if asked, claims).
:class:`MemoryInformers` is the same set fed by hand, for tests, benchmarks and plugin authors.
"""

from __future__ import annotations

from typing import Any

from koordshared.apis.core.pod import index_by_owner
from koordshared.kube.informer import Informer
from koordshared.kube.informers import InformerSet, MemoryInformerSet, cluster_watches
from koordshared.kube.memstore import MemoryStore

WATCHES = cluster_watches(pod_indexers={"owner": index_by_owner}, keep_volume_kinds=True)


class SharedInformers(InformerSet):
    """List+watch caches on the official client; :meth:`start` runs every one created so far."""

    def __init__(
        self, api_client: Any, *, request_timeout: float = 10.0, watch_timeout: float = 300.0
    ) -> None:
        super().__init__(api_client, WATCHES, request_timeout=request_timeout, watch_timeout=watch_timeout)

    @property
    def nodes(self) -> Informer:
        return self["nodes"]

    @property
    def pods(self) -> Informer:
        return self["pods"]

    @property
    def node_metrics(self) -> Informer:
        return self["nodemetrics"]


class MemoryInformers(MemoryInformerSet):
    """The same caches fed with :meth:`MemoryStore.put`/``remove`` (trimmed and indexed alike)."""

    def __init__(self, nodes: Any = (), pods: Any = (), node_metrics: Any = ()) -> None:
        super().__init__(WATCHES, {"nodes": nodes, "pods": pods, "nodemetrics": node_metrics})

    @property
    def nodes(self) -> MemoryStore:
        return self["nodes"]

    @property
    def pods(self) -> MemoryStore:
        return self["pods"]

    @property
    def node_metrics(self) -> MemoryStore:
        return self["nodemetrics"]
