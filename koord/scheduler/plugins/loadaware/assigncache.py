"""The pod assign cache (Koordinator's ``podAssignCache``): per node, the latest NodeMetric and the pods
placed on the node, so the load a node will carry is its reported usage plus what the report cannot
show yet. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from koord.scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs, Vec
from koord.scheduler.plugins.loadaware.estimator import (
    ANNOTATION_SECONDS_AFTER_INITIALIZED,
    ANNOTATION_SECONDS_AFTER_SCHEDULED,
    custom_seconds,
    estimate_with_args,
    shared_vec,
)
from koord.scheduler.plugins.loadaware.nodestate import NodeState, PodAssign
from koord.scheduler.plugins.loadaware.table import LoadTable
from koordshared.apis.core.pod import as_list, as_map, condition
from koordshared.apis.extension import qos as extension
from koordshared.apis.meta.quantity import parse_time
from koordshared.apis.slo.nodemetric import CollectPolicy, NodeMetricStatus, Usage, parse_node_metric

Obj = Mapping[str, Any]


class Existing(NamedTuple):
    """What a node carries before the incoming pod (``GetNodeMetricAndEstimatedOfExisting``)."""

    update_time: float | None
    has_node_metric: bool
    """``status.nodeMetric`` is set (a NodeMetric object without it is "reported nothing yet")."""
    usage: Vec


def _vec(u: Usage | None) -> Vec | None:
    return None if u is None else (u.cpu_milli, u.memory_bytes)


def is_terminated(pod: Obj) -> bool:
    return as_map(pod, "status").get("phase") in ("Succeeded", "Failed")


class PodAssignCache:
    """Thread-safe; ``clock`` gives wall seconds (the assign time of pods without PodScheduled)."""

    def __init__(self, args: LoadAwareSchedulingArgs, clock: Callable[[], float]) -> None:
        self.args = args
        self.clock = clock
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeState] = {}
        self.table = LoadTable()
        """The per-node sums as arrays (read them under :meth:`reading`)."""
        self._reserved: dict[str, str] = {}
        """UID -> node of the pods :meth:`reserve` counted that the informer has not shown bound yet."""

    # ---- pods -------------------------------------------------------------------------------------

    def _entry(self, pod: Obj) -> PodAssign:
        meta = as_map(pod, "metadata")
        prio, est = estimate_with_args(pod, self.args)
        scheduled = condition(pod, "PodScheduled")
        ts = (
            parse_time(scheduled.get("lastTransitionTime"))
            if scheduled and scheduled.get("status") == "True"
            else None
        )
        timestamp = ts if ts is not None else self.clock()
        return PodAssign(
            uid=str(meta.get("uid") or ""),
            pod=pod,
            timestamp=timestamp,
            estimated=shared_vec(est) if est != (0, 0) else None,
            deadline=self._deadline(pod, timestamp),
            prod=prio is extension.PriorityClass.PROD,
        )

    def _deadline(self, pod: Obj, timestamp: float) -> float:
        after_scheduled = after_initialized = -1
        if self.args.allow_customize_estimation:
            after_scheduled = custom_seconds(pod, ANNOTATION_SECONDS_AFTER_SCHEDULED)
            after_initialized = custom_seconds(pod, ANNOTATION_SECONDS_AFTER_INITIALIZED)
        if after_scheduled < 0 and self.args.estimated_seconds_after_pod_scheduled is not None:
            after_scheduled = self.args.estimated_seconds_after_pod_scheduled
        if after_initialized < 0 and self.args.estimated_seconds_after_initialized is not None:
            after_initialized = self.args.estimated_seconds_after_initialized
        if after_initialized > 0:
            init = condition(pod, "Initialized")
            if init is not None and init.get("status") == "True":
                t = parse_time(init.get("lastTransitionTime"))
                if t is not None:
                    return t + after_initialized
        if after_scheduled > 0:
            return timestamp + after_scheduled
        return 0.0

    def assign(self, node_name: str, pod: Obj) -> None:
        """Count ``pod`` on ``node_name`` (replacing an earlier entry of the same UID there)."""
        if not node_name or is_terminated(pod):
            return
        entry = self._entry(pod)
        with self._lock:
            n = self._nodes.get(node_name)
            if n is None:
                n = self._nodes[node_name] = NodeState()
            old = n.pods.get(entry.uid)
            n.pods[entry.uid] = entry
            if n.has_metric:
                if old is not None:
                    n.add(old, -1)
                n.add(entry)
                self.table.write(node_name, n)

    def reserve(self, node_name: str, pod: Obj) -> None:
        """:meth:`assign` for a pod placed before the API server says so (``/bind``): remembered until
        the informer shows it bound, so that deleting it while still pending takes its load away."""
        self.assign(node_name, pod)
        uid = str(as_map(pod, "metadata").get("uid") or "")
        if node_name and uid:
            with self._lock:
                self._reserved[uid] = node_name

    def _bound(self, pod: Obj) -> None:
        uid = str(as_map(pod, "metadata").get("uid") or "")
        if as_map(pod, "spec").get("nodeName") and uid in self._reserved:
            with self._lock:
                self._reserved.pop(uid, None)

    def unassign(self, node_name: str, uid: str) -> None:
        if not node_name:
            return
        with self._lock:
            if self._reserved.get(uid) == node_name:
                del self._reserved[uid]
            n = self._nodes.get(node_name)
            if n is None:
                return
            old = n.pods.pop(uid, None)
            if old is not None and n.has_metric:
                n.add(old, -1)
                self.table.write(node_name, n)
            if not n.has_metric and not n.pods:
                del self._nodes[node_name]

    def cached_pod(self, node_name: str, uid: str) -> PodAssign | None:
        with self._lock:
            n = self._nodes.get(node_name)
            return n.pods.get(uid) if n is not None else None

    def on_pod_add(self, pod: Obj) -> None:
        self._bound(pod)
        self.assign(str(as_map(pod, "spec").get("nodeName") or ""), pod)

    def on_pod_update(self, old: Obj, pod: Obj) -> None:
        """Koordinator's ``OnUpdate``, with the ghost-load fix for a changed ``spec.nodeName``."""
        node = str(as_map(pod, "spec").get("nodeName") or "")
        uid = str(as_map(pod, "metadata").get("uid") or "")
        old_node = str(as_map(old, "spec").get("nodeName") or "")
        self._bound(pod)
        if old_node and old_node != node:
            self.unassign(old_node, uid)
        cached = self.cached_pod(node, uid)
        if cached is None:
            self.assign(node, pod)
        elif is_terminated(pod):
            self.unassign(node, uid)
        elif as_map(pod, "spec") != as_map(cached.pod, "spec") or as_list(
            as_map(pod, "status"), "conditions"
        ) != as_list(as_map(cached.pod, "status"), "conditions"):
            self.assign(node, pod)

    def on_pod_delete(self, pod: Obj) -> None:
        """A pending pod deleted after :meth:`reserve` arrives without a node: its reserved one."""
        uid = str(as_map(pod, "metadata").get("uid") or "")
        self.unassign(str(as_map(pod, "spec").get("nodeName") or "") or self._reserved.get(uid, ""), uid)

    # ---- NodeMetrics ------------------------------------------------------------------------------

    def set_node_metric(self, obj: Obj) -> None:
        """Take a NodeMetric (add or update): every sum of its node is rebuilt."""
        name = str(as_map(obj, "metadata").get("name") or "")
        if not name:
            return
        parsed = parse_node_metric(obj)
        has_node_metric = parsed.has_node_metric
        status = parsed.status or NodeMetricStatus()
        interval = float(CollectPolicy.from_spec(as_map(obj, "spec")).report_interval_seconds)
        node_usage = (_vec(status.node_usage) or (0, 0)) if has_node_metric else None
        prod_base = [0, 0]
        if has_node_metric and self.args.prod_usage_include_sys and status.system_usage is not None:
            prod_base = [status.system_usage.cpu_milli, status.system_usage.memory_bytes]
        with self._lock:
            n = self._nodes.get(name)
            if n is None:
                n = self._nodes[name] = NodeState()
            n.has_metric = True
            n.has_node_metric = has_node_metric
            n.report_interval = interval
            n.status_time = status.update_time
            if status.update_time is not None:
                n.update_time = status.update_time
            n.set_report(status.pods_metric, status.aggregated_node_usages if has_node_metric else None)
            n.node_usage, n.prod_usage = node_usage, prod_base
            n.rebuild()
            self.table.write(name, n)

    def delete_node_metric(self, obj: Obj) -> None:
        name = str(as_map(obj, "metadata").get("name") or "")
        with self._lock:
            n = self._nodes.get(name)
            if n is None:
                return
            n.has_metric = n.has_node_metric = False
            if not n.pods:
                del self._nodes[name]
            self.table.write(name, None)

    # ---- reading ----------------------------------------------------------------------------------

    def existing(
        self, node_name: str, prod: bool, agg_type: str = "", agg_duration: float = 0.0
    ) -> Existing | None:
        """The node's load before the incoming pod; ``None`` when the node has no NodeMetric (NotFound)."""
        with self._lock:
            n = self._nodes.get(node_name)
            if n is None or not n.has_metric:
                return None
            return Existing(n.status_time, n.has_node_metric, n.existing(prod, agg_type, agg_duration))

    def slot(self, node_name: str) -> int:
        """The node's row in :attr:`table` (see :mod:`.table`)."""
        with self._lock:
            return self.table.slot(node_name, self._nodes.get(node_name))

    def agg_column(self, key: tuple[str, float]) -> int:
        """The :attr:`table` column of the existing load under an aggregation (type, window)."""
        with self._lock:
            return self.table.agg_column(key, self._nodes)

    def reading(self) -> _Reading:
        """``with cache.reading() as nodes:`` the per-node states under the lock, for a batch of reads
        (one lock for a 5000-node call instead of 5000); call ``.existing(...)`` on a node only when it
        ``has_metric``."""
        return _Reading(self)

    def debug(self, node_name: str) -> dict[str, Any]:
        """What the cache holds for a node (the extender's debug route; Koordinator's ``/node/:name``)."""
        with self._lock:
            n = self._nodes.get(node_name)
            if n is None:
                return {"pods": []}
            pods = sorted(n.pods.values(), key=lambda p: p.timestamp)
            out: dict[str, Any] = {
                "pods": [
                    {"pod": p.key, "uid": p.uid, "timestamp": p.timestamp, "estimated": p.estimated}
                    for p in pods
                ],
                "hasNodeMetric": n.has_metric,
            }
            if n.has_metric:
                node_delta_pods, prod_delta_pods, estimated_pods = n.counted()
                out.update(
                    updateTime=n.status_time,
                    reportIntervalSeconds=n.report_interval,
                    nodeUsage=n.node_usage,
                    prodUsage=list(n.prod_usage),
                    nodeDelta=list(n.node_delta),
                    prodDelta=list(n.prod_delta),
                    nodeEstimated=list(n.node_estimated),
                    nodeDeltaPods=node_delta_pods,
                    prodDeltaPods=prod_delta_pods,
                    nodeEstimatedPods=estimated_pods,
                    aggregated={f"{t}/{d:g}s": v for (t, d), v in sorted(n.every_aggregated().items())},
                )
            return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._nodes)


class _Reading:
    def __init__(self, cache: PodAssignCache) -> None:
        self._cache = cache

    def __enter__(self) -> Mapping[str, NodeState]:
        self._cache._lock.acquire()
        return self._cache._nodes

    def __exit__(self, *_exc: object) -> None:
        self._cache._lock.release()
