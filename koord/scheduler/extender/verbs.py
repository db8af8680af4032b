"""The extender's verbs on top of the framework: ``filter``, ``prioritize``, ``bind``, and ``explain`` (one
node, every plugin's word on it: the debug route and ``koord-manager top nodes`` use it).

kube-scheduler calls filter, then prioritize, then bind for one pod as separate HTTP requests; the
framework's cycle state of a pod is kept between them by pod UID (bounded, expiring), so what
``pre_filter`` computed is there for ``score`` and ``reserve``. ``bind`` assumes the pod on its node in
koord-scheduler's cache and runs the Reserve plugins before the API binding (so the next pod already sees
this one), and Unreserve and forgets it when the binding fails: without a Reserve hook in the extender
protocol, this is the only moment an extender learns the choice. ``filter`` and ``prioritize`` run over
the snapshot, brought up to date at the start of each call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from koord.scheduler.extender.binder import Binder, BindFailed
from koord.scheduler.extender.handle import ExtenderHandle
from koord.scheduler.extender.metrics import ExtenderMetrics
from koord.scheduler.extender.wire import BindingArgs, ExtenderArgs, host_entry
from koord.scheduler.framework import CycleState, NodeInfo, NodeSet, Obj, PodInfo, Snapshot, verdicts
from koord.scheduler.framework.runtime import Framework, PluginFailure
from koordshared.apis.core.pod import pod_key, pod_uid

log = logging.getLogger(__name__)

CYCLE_TTL = 300.0
CYCLE_LIMIT = 8192
PROBE_POD: Obj = {
    "metadata": {"name": "probe", "namespace": "default", "uid": "probe"},
    "spec": {"containers": [{"name": "probe", "resources": {}}]},
}
"""The pod ``explain`` judges when none is named: no requests (LoadAware estimates it at 250m/200Mi)."""


class NotReady(Exception):
    """The caches have not synced: no verdict yet."""


@dataclass(frozen=True, slots=True)
class FilterAnswer:
    passed: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]


@dataclass(frozen=True, slots=True)
class Priorities:
    """A ``/prioritize`` answer: each node's ``HostPriority`` written up to its score
    (:func:`~koord.scheduler.extender.wire.host_entry`, kept as a snapshot column so thousands of nodes
    are not written again on every call) and its score, in order."""

    hosts: list[str]
    scores: list[int]


HOST_ENTRY = "extender.host_entry"


def _host_entry(ni: NodeInfo) -> str:
    return host_entry(ni.name)


class _Cycles:
    """Cycle states by pod UID, oldest dropped first (by age and by count)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[float, CycleState, Obj]] = OrderedDict()

    def put(self, key: str, state: CycleState, pod: Obj) -> None:
        now = self._clock()
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = (now, state, pod)
            while self._items:
                oldest_key, (t, _, _) = next(iter(self._items.items()))
                if len(self._items) <= CYCLE_LIMIT and now - t < CYCLE_TTL:
                    break
                del self._items[oldest_key]

    def get(self, key: str) -> tuple[CycleState, Obj] | None:
        with self._lock:
            item = self._items.get(key)
        if item is None or self._clock() - item[0] >= CYCLE_TTL:
            return None
        return item[1], item[2]

    def pop(self, key: str) -> tuple[CycleState, Obj] | None:
        with self._lock:
            item = self._items.pop(key, None)
        return None if item is None else (item[1], item[2])

    def __len__(self) -> int:
        return len(self._items)


def attempt_key(pod: Obj) -> str:
    """Which scheduling attempt a request belongs to: the pod's UID (a pod deleted and re-created under
    its name is another attempt), else ``namespace/name``."""
    return pod_uid(pod)


class Extender:
    def __init__(
        self,
        framework: Framework,
        handle: ExtenderHandle,
        metrics: ExtenderMetrics,
        binder: Binder | None = None,
        *,
        ready: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.framework = framework
        self.handle = handle
        self.metrics = metrics
        self.binder = binder
        self._ready = ready or handle.has_synced
        self.cycles = _Cycles(clock)
        self._last: tuple[Snapshot, int, list[str], np.ndarray] | None = None
        """The last NodeNames looked up, with their rows and the snapshot layout they were found in:
        kube-scheduler asks about the same list pod after pod, and comparing names is cheaper than
        hashing thousands of freshly decoded ones."""

    def ready(self) -> bool:
        return self._ready()

    def _nodes(self, snapshot: Snapshot, args: ExtenderArgs) -> NodeSet:
        """The nodes asked about, as snapshot rows when every one is the snapshot's (batch plugins then
        work on arrays). A node the snapshot does not know yet (kube-scheduler's node cache may be a
        moment ahead of ours) is judged on its own NodeInfo: from the request's Node object when one was
        sent, else empty; then the whole call runs node by node. A Node object sent in the request is
        the snapshot's row when it is the same version."""
        index = snapshot.index
        if args.nodes is None:
            names = args.node_names or []
            last = self._last
            if last is not None and last[0] is snapshot and last[1] == snapshot.layout and last[2] == names:
                return NodeSet(snapshot, last[3])
            rows = np.fromiter(map(index.get, names, repeat(-1)), dtype=np.int64, count=len(names))
            if not len(rows) or rows.min() >= 0:
                rows.setflags(write=False)
                self._last = (snapshot, snapshot.layout, names, rows)
                return NodeSet(snapshot, rows)
            return NodeSet(snapshot, None, [snapshot.node_info(n) or NodeInfo(n, None) for n in names])
        infos: list[NodeInfo] = []
        for node in args.nodes:
            meta = node.get("metadata") or {}
            name = str(meta.get("name") or "")
            cached = snapshot.node_info(name)
            rv = meta.get("resourceVersion")
            cached_rv = (
                (cached.node.get("metadata") or {}).get("resourceVersion") if cached and cached.node else None
            )
            if cached is not None and rv and cached_rv == rv:
                infos.append(cached)
            else:
                infos.append(NodeInfo(name, node))
        return NodeSet.of(snapshot, infos)

    def _failure(self, err: PluginFailure) -> None:
        self.metrics.plugin_errors.labels(err.plugin, err.point).inc()
        log.warning("%s", err)

    # ---- verbs ------------------------------------------------------------------------------------

    def filter(self, args: ExtenderArgs) -> FilterAnswer:
        """Raises :class:`NotReady` or :class:`PluginFailure` (the call's answer is then an error)."""
        if not self.ready():
            raise NotReady("caches not synced yet")
        pod = args.pod
        state = verdicts.new_state(pod)
        self.cycles.put(attempt_key(pod), state, pod)
        try:
            with self.handle.cycle() as snapshot:
                nodes = self._nodes(snapshot, args)
                out = verdicts.run_filter(self.framework, state, pod, nodes, args.node_names)
        except PluginFailure as err:
            self._failure(err)
            raise
        for plugin, n in out.rejected_by.items():
            self.metrics.filter_rejections.labels(plugin).inc(n)
        return FilterAnswer(out.passed, out.failed, out.unresolvable)

    def prioritize(self, args: ExtenderArgs) -> Priorities:
        if not self.ready():
            raise NotReady("caches not synced yet")
        pod = args.pod
        key = attempt_key(pod)
        kept = self.cycles.get(key)
        try:
            with self.handle.cycle() as snapshot:
                if kept is None:  # no filter call seen (filterVerb unset): PreFilter has not run yet
                    state = verdicts.new_state(pod)
                    self.framework.run_pre_filter(state, pod)
                    self.cycles.put(key, state, pod)
                else:
                    state = kept[0]
                nodes, scores = verdicts.node_scores(self.framework, state, pod, self._nodes(snapshot, args))
                hosts = nodes.column(HOST_ENTRY, _host_entry)
                return Priorities(
                    hosts.tolist() if hosts is not None else [host_entry(ni.name) for ni in nodes], scores
                )
        except PluginFailure as err:
            self._failure(err)
            raise

    def bind(self, b: BindingArgs) -> str:
        """Assume the pod on the node in the cache, Reserve, POST the Binding; on a failure Unreserve and
        forget the pod (koord-scheduler's order). The error for kube-scheduler ("" if bound)."""
        if self.binder is None:
            return "this extender does not bind (started without API access)"
        kept = self.cycles.pop(b.pod_uid) if b.pod_uid else None
        if kept is None:
            kept = self.cycles.pop(f"{b.pod_namespace}/{b.pod_name}")
        if kept is not None:
            state, pod = kept
        else:
            cached = self.handle.get_pod(b.pod_namespace, b.pod_name)
            if cached is None:
                self.metrics.bindings.labels("reserve_failed").inc()
                return f"pod {b.pod_namespace}/{b.pod_name} is not in the extender's cache"
            state, pod = verdicts.new_state(cached), cached
        info = state.pod_info or PodInfo(pod)
        assumed = self.handle.assume(info, b.node)
        st = self.framework.run_reserve(state, pod, b.node)
        if st is not None:
            if assumed:
                self.handle.forget(info)
            self.metrics.bindings.labels("reserve_failed").inc()
            return f"reserve on {b.node} failed in plugin {st.plugin}: {st.message}"
        try:
            self.binder.bind(b.pod_namespace, b.pod_name, b.pod_uid, b.node)
        except BindFailed as err:
            self.framework.run_unreserve(state, pod, b.node)
            if assumed:
                self.handle.forget(info)
            self.metrics.bindings.labels("api_error").inc()
            log.info("binding %s/%s to %s failed: %s", b.pod_namespace, b.pod_name, b.node, err)
            return str(err)
        if assumed:
            self.handle.finish_binding(info)
        self.metrics.bindings.labels("bound").inc()
        return ""

    def explain(self, node_name: str, pod: Obj | None = None) -> dict[str, Any]:
        """What the framework would say of ``node_name`` for ``pod`` (default: a pod with no requests)
        among every cached node, and what the plugins keep about it. Reserves nothing."""
        return self.explain_nodes([node_name], pod)[node_name]

    def explain_nodes(self, names: list[str], pod: Obj | None = None) -> dict[str, dict[str, Any]]:
        """:meth:`explain` of several nodes from one pass over the cached nodes."""
        pod = pod or PROBE_POD
        with self.handle.cycle() as snapshot:
            nodes = snapshot.node_infos()
            docs = verdicts.explain(self.framework, pod, nodes, names)
            known = set(snapshot.index)
        who = pod_key(pod)
        return {n: {"node": n, "known": n in known, "pod": who, **docs[n]} for n in names}

    def cache_sizes(self) -> Mapping[str, int]:
        return {**self.handle.sizes(), "cycles": len(self.cycles)}
