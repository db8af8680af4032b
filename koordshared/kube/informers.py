"""One way to build the caches a process keeps: each process declares its :class:`Watch` list (which
resource, selected how, indexed and trimmed how) and gets an :class:`InformerSet` of list+watch caches on
the official client, or a :class:`MemoryInformerSet` fed by hand (tests, benchmarks, plugin authors) with
the same names, indexes and trims.

Caches are looked up by name (``informers["pods"]``); :meth:`InformerSet.shared` adds one on first use
(a plugin asking for another resource) and starts it at once when the set is already running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.meta import groups
from koordshared.apis.slo.nodemetric import parse_node_metric
from koordshared.kube.client import send
from koordshared.kube.informer import IndexFunc, Informer, index_by_node
from koordshared.kube.memstore import MemoryStore
from koordshared.kube.transport import LeanClient
from koordshared.kube.trim import compact, slim_node, slim_pod
from koordshared.runtime.lifecycle import Supervisor

Obj = Mapping[str, Any]
Transform = Callable[[Obj], Obj]


@dataclass(frozen=True, slots=True)
class Watch:
    """One cache: the objects of ``resource`` (in ``namespace``, matching ``field_selector`` and
    ``label_selector``). ``list_parts``: field selectors listed one after the other (each beside
    ``field_selector``), the cache synced once the last part's first page is in
    (:meth:`~koordshared.kube.informer.Informer._list`)."""

    name: str
    resource: groups.Resource
    field_selector: str = ""
    namespace: str = ""
    indexers: Mapping[str, IndexFunc] = field(default_factory=dict)
    transform: Transform | None = None
    label_selector: str = ""
    list_parts: tuple[str, ...] = ()


def list_call(api_client: Any, watch: Watch) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The function that lists (or, with ``watch=True``, watches) ``watch``'s objects and its keyword
    arguments; it takes the official client's list keywords (``limit``, ``_continue``,
    ``resource_version``, ``timeout_seconds``, ``allow_watch_bookmarks``, ``_request_timeout``) and
    answers with the raw response. Sent on the resource's path without the typed API classes, whose
    import is most of a process's start."""
    kwargs: dict[str, Any] = {}
    if watch.field_selector:
        kwargs["field_selector"] = watch.field_selector
    if watch.label_selector:
        kwargs["label_selector"] = watch.label_selector
    return PathList(api_client, watch.resource.path(namespace=watch.namespace)), kwargs


_QUERY = {
    "field_selector": "fieldSelector",
    "label_selector": "labelSelector",
    "limit": "limit",
    "_continue": "continue",
    "watch": "watch",
    "resource_version": "resourceVersion",
    "resource_version_match": "resourceVersionMatch",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
}
"""The official client's list keywords -> kube-apiserver's query parameters."""


class PathList:
    """A list (or watch) call on one collection path, with the official client's keywords."""

    def __init__(self, api_client: Any, path: str) -> None:
        self.api_client = api_client
        self.path = path

    def __call__(self, **kwargs: Any) -> Any:
        timeout = kwargs.pop("_request_timeout", None)
        kwargs.pop("_preload_content", None)  # the body is always left unread
        unknown = set(kwargs) - set(_QUERY)
        if unknown:
            raise TypeError(f"list {self.path}: unknown argument(s) {sorted(unknown)}")
        query = {_QUERY[k]: _query_value(v) for k, v in kwargs.items() if v is not None and v != ""}
        # A lean client reads a list page whole on a pooled connection; only a watch needs its own.
        stream = bool(kwargs.get("watch")) or not isinstance(self.api_client, LeanClient)
        return send(self.api_client, "GET", self.path, query=query, timeout=timeout, stream=stream)


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class InformerSet:
    """List+watch caches on one API client, by name; :meth:`start` runs every one created so far."""

    def __init__(
        self,
        api_client: Any,
        watches: Iterable[Watch],
        *,
        request_timeout: float = 10.0,
        watch_timeout: float = 300.0,
        **informer_opts: Any,
    ) -> None:
        self.api_client = api_client
        self._opts: dict[str, Any] = {
            "request_timeout": request_timeout,
            "watch_timeout": watch_timeout,
            **informer_opts,
        }
        self._lock = threading.Lock()
        self._all: dict[str, Informer] = {}
        self._started: tuple[threading.Event, Supervisor] | None = None
        for w in watches:
            self._all[w.name] = self._informer(w)

    def _informer(self, w: Watch) -> Informer:
        list_fn, kwargs = list_call(self.api_client, w)
        return Informer(
            w.name,
            list_fn,
            kwargs,
            indexers=w.indexers,
            transform=w.transform,
            list_parts=w.list_parts,
            hold=(lambda: self._others_synced(w.name)) if w.list_parts else None,
            **self._opts,
        )

    def _others_synced(self, name: str) -> bool:
        # A cache synced ahead of its list's end finishes it once the others are synced (what the process
        # waits for to start), so they do not share the interpreter with the rest of its list meanwhile.
        with self._lock:
            return all(inf.has_synced() for n, inf in self._all.items() if n != name)

    def __getitem__(self, name: str) -> Informer:
        return self._all[name]

    def __iter__(self) -> Iterator[Informer]:
        with self._lock:
            return iter(list(self._all.values()))

    def watch(self, w: Watch) -> Informer:
        """The cache ``w.name``, created from ``w`` on first use (and started if the set runs)."""
        with self._lock:
            inf = self._all.get(w.name)
            if inf is None:
                inf = self._all[w.name] = self._informer(w)
                if self._started is not None:
                    stop, supervisor = self._started
                    supervisor.go(f"informer-{w.name}", lambda: inf.run(stop))
            return inf

    def shared(
        self, name: str, list_fn: Callable[..., Any], kwargs: Mapping[str, Any] | None = None
    ) -> Informer:
        """The cache called ``name``, created on first use (and started if the set runs)."""
        with self._lock:
            inf = self._all.get(name)
            if inf is None:
                inf = self._all[name] = Informer(name, list_fn, kwargs, **self._opts)
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


class MemoryInformerSet:
    """The same caches fed with :meth:`MemoryStore.put`/``remove`` (trimmed and indexed alike);
    ``objects`` gives each cache its first contents by name."""

    def __init__(self, watches: Iterable[Watch], objects: Mapping[str, Iterable[Obj]] | None = None) -> None:
        objects = objects or {}
        self._all: dict[str, MemoryStore] = {
            w.name: MemoryStore(
                objects.get(w.name, ()), indexers=w.indexers, transform=w.transform, name=w.name
            )
            for w in watches
        }

    def __getitem__(self, name: str) -> MemoryStore:
        return self._all[name]

    def __iter__(self) -> Iterator[MemoryStore]:
        return iter(list(self._all.values()))

    def watch(self, w: Watch) -> MemoryStore:
        store = self._all.get(w.name)
        if store is None:
            store = self._all[w.name] = MemoryStore(indexers=w.indexers, transform=w.transform, name=w.name)
        return store

    def shared(
        self, name: str, list_fn: Callable[..., Any], kwargs: Mapping[str, Any] | None = None
    ) -> MemoryStore:
        store = self._all.get(name)
        if store is None:
            store = self._all[name] = MemoryStore(name=name)
        return store

    def has_synced(self) -> bool:
        return True

    def sizes(self) -> dict[str, int]:
        return {name: len(store) for name, store in self._all.items()}


def cluster_watches(
    *,
    pod_indexers: Mapping[str, IndexFunc] | None = None,
    keep_volume_kinds: bool = False,
    parse_node_metrics: bool = False,
) -> tuple[Watch, Watch, Watch]:
    """The caches the scheduler and the descheduler both keep: nodes, the pods that hold resources (indexed
    by node, plus ``pod_indexers``) and NodeMetrics, each trimmed to what their plugins read
    (:mod:`koordshared.kube.trim`); ``keep_volume_kinds`` keeps the kinds of pod volumes (an evictor refuses
    local storage); ``parse_node_metrics`` keeps NodeMetrics with their status parsed
    (:mod:`koordshared.apis.slo.nodemetric`, the scheduler's choice)."""

    def trim_pod(obj: Obj) -> Obj:
        return slim_pod(obj, keep_volume_kinds=keep_volume_kinds)

    return (
        Watch("nodes", groups.NODES, transform=slim_node),
        Watch(
            "pods",
            groups.PODS,
            groups.NON_TERMINAL_PODS,
            indexers={"node": index_by_node, **(pod_indexers or {})},
            transform=trim_pod,
        ),
        Watch(
            "nodemetrics",
            groups.NODE_METRICS,
            transform=_parsed_node_metric if parse_node_metrics else compact,
        ),
    )


def _parsed_node_metric(obj: Obj) -> Obj:
    # Compacted first: the pod names the status repeats become the strings the pod cache holds.
    return parse_node_metric(compact(obj))
