"""The extender's verbs on top of the framework: ``filter``, ``prioritize``, ``bind``, and ``explain`` (one
node, every plugin's word on it: the debug route and ``koord-manager top nodes`` use it).

kube-scheduler calls filter, then prioritize, then bind for one pod as separate HTTP requests; the
framework's cycle state of a pod is kept between them by pod UID (bounded, expiring), so what
``pre_filter`` computed is there for ``score`` and ``reserve``. ``bind`` runs the Reserve plugins before
the API binding (so the next pod already sees this one's load) and Unreserve when the binding fails:
without a Reserve hook in the extender protocol, this is the only moment an extender learns the choice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.extender.binder import Binder, BindFailed
from koord.scheduler.extender.handle import ClusterHandle
from koord.scheduler.extender.metrics import ExtenderMetrics
from koord.scheduler.extender.wire import BindingArgs, ExtenderArgs
from koord.scheduler.framework import CycleState, NodeInfo, Obj, verdicts
from koord.scheduler.framework.runtime import Framework, PluginFailure

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
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")


class Extender:
    def __init__(
        self,
        framework: Framework,
        handle: ClusterHandle,
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

    def ready(self) -> bool:
        return self._ready()

    def _node_infos(self, args: ExtenderArgs) -> list[NodeInfo]:
        """Cached NodeInfos by name; for Node objects sent in the request, the cached one when it is the
        same version (its memo is reused), else one built from the request's object."""
        handle = self.handle
        if args.nodes is None:
            return [handle.node_info(n) or NodeInfo(n, None) for n in args.node_names or ()]
        out: list[NodeInfo] = []
        for node in args.nodes:
            meta = node.get("metadata") or {}
            name = str(meta.get("name") or "")
            cached = handle.node_info(name)
            rv = meta.get("resourceVersion")
            cached_rv = (
                (cached.node.get("metadata") or {}).get("resourceVersion") if cached and cached.node else None
            )
            if cached is not None and rv and cached_rv == rv:
                out.append(cached)
            else:
                out.append(NodeInfo(name, node))
        return out

    def _failure(self, err: PluginFailure) -> None:
        self.metrics.plugin_errors.labels(err.plugin, err.point).inc()
        log.warning("%s", err)

    # ---- verbs ------------------------------------------------------------------------------------

    def filter(self, args: ExtenderArgs) -> FilterAnswer:
        """Raises :class:`NotReady` or :class:`PluginFailure` (the call's answer is then an error)."""
        if not self.ready():
            raise NotReady("caches not synced yet")
        pod = args.pod
        nodes = self._node_infos(args)
        state = verdicts.new_state(pod)
        self.cycles.put(attempt_key(pod), state, pod)
        try:
            out = verdicts.run_filter(self.framework, state, pod, nodes)
        except PluginFailure as err:
            self._failure(err)
            raise
        for plugin, n in out.rejected_by.items():
            self.metrics.filter_rejections.labels(plugin).inc(n)
        return FilterAnswer(out.passed, out.failed, out.unresolvable)

    def prioritize(self, args: ExtenderArgs) -> dict[str, int]:
        if not self.ready():
            raise NotReady("caches not synced yet")
        pod = args.pod
        key = attempt_key(pod)
        kept = self.cycles.get(key)
        try:
            if kept is None:  # no filter call seen (filterVerb unset): PreFilter has not run yet
                state = verdicts.new_state(pod)
                self.framework.run_pre_filter(state, pod)
                self.cycles.put(key, state, pod)
            else:
                state = kept[0]
            return verdicts.run_score(self.framework, state, pod, self._node_infos(args))
        except PluginFailure as err:
            self._failure(err)
            raise

    def bind(self, b: BindingArgs) -> str:
        """Reserve, POST the Binding, Unreserve on failure; the error for kube-scheduler ("" if bound)."""
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
        st = self.framework.run_reserve(state, pod, b.node)
        if st is not None:
            self.metrics.bindings.labels("reserve_failed").inc()
            return f"reserve on {b.node} failed in plugin {st.plugin}: {st.message}"
        try:
            self.binder.bind(b.pod_namespace, b.pod_name, b.pod_uid, b.node)
        except BindFailed as err:
            self.framework.run_unreserve(state, pod, b.node)
            self.metrics.bindings.labels("api_error").inc()
            log.info("binding %s/%s to %s failed: %s", b.pod_namespace, b.pod_name, b.node, err)
            return str(err)
        self.metrics.bindings.labels("bound").inc()
        return ""

    def explain(self, node_name: str, pod: Obj | None = None) -> dict[str, Any]:
        """What the framework would say of ``node_name`` for ``pod`` (default: a pod with no requests)
        among every cached node, and what the plugins keep about it. Reserves nothing."""
        return self.explain_nodes([node_name], pod)[node_name]

    def explain_nodes(self, names: list[str], pod: Obj | None = None) -> dict[str, dict[str, Any]]:
        """:meth:`explain` of several nodes from one pass over the cached nodes."""
        pod = pod or PROBE_POD
        meta = pod.get("metadata") or {}
        nodes = list(self.handle.node_infos())
        docs = verdicts.explain(self.framework, pod, nodes, names)
        known = {ni.name for ni in nodes}
        who = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        return {n: {"node": n, "known": n in known, "pod": who, **docs[n]} for n in names}

    def cache_sizes(self) -> Mapping[str, int]:
        h = self.handle
        return {
            "nodes": len(h.node_infos()),
            "pods": len(h.pods),
            "nodemetrics": len(h.node_metrics),
            "cycles": len(self.cycles),
        }
