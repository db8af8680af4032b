"""One node's side of the assign cache: its latest NodeMetric (usage, aggregated windows, per-pod usage),
its cached pods and the sums LoadAware reads (Koordinator's ``nodeInfo`` with ``addPod``/``deletePod``).
Not thread-safe by itself: :class:`~koord.scheduler.plugins.loadaware.assigncache.PodAssignCache`
holds the lock around every use.

The NodeMetric is read where the cache keeps it, parsed (:mod:`koordshared.apis.slo.nodemetric`), not
copied: a pod's reported usage is looked up by name in ``podsMetric`` when the pod is added or removed,
an aggregated usage is found the first time a (type, window) is asked after a report. Which pods count
in which sum (Koordinator keeps them in sets, for its debug API) is a function of the pods and the
report, so :meth:`NodeState.counted` works it out when asked. At 100 000 pods this keeps the assign
cache to its pods and sums.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.plugins.loadaware.args import Vec
from koordshared.apis.core.pod import pod_key
from koordshared.apis.extension import qos as extension
from koordshared.apis.slo.nodemetric import AggregatedUsage, PodMetric

Obj = Mapping[str, Any]
PROD = extension.PriorityClass.PROD.value


@dataclass(frozen=True, slots=True)
class PodAssign:
    """One cached pod: what addPod/deletePod need, computed once when the pod is (re)assigned."""

    uid: str
    pod: Obj
    timestamp: float
    estimated: Vec | None
    deadline: float
    """Forced-estimation deadline (0: none)."""
    prod: bool

    @property
    def key(self) -> str:
        """``namespace/name``: the NodeMetric reports pods by name."""
        return pod_key(self.pod)


PodUsage = tuple[int, int, bool]
"""A pod's reported usage (cpu, memory) and whether the NodeMetric reports it as prod."""


class NodeState:
    __slots__ = (
        "_agg",
        "has_metric",
        "has_node_metric",
        "node_delta",
        "node_estimated",
        "node_usage",
        "pod_metrics",
        "pods",
        "prod_delta",
        "prod_usage",
        "report_interval",
        "reported_aggregated",
        "status_time",
        "update_time",
    )

    def __init__(self) -> None:
        self.pods: dict[str, PodAssign] = {}
        self.has_metric = False
        self.has_node_metric = False
        self.update_time: float | None = None
        """Kept from an earlier report when a new one has no updateTime, as Koordinator does."""
        self.status_time: float | None = None
        """The current report's own updateTime (expiry is judged on it)."""
        self.report_interval = 60.0
        self.pod_metrics: Mapping[str, PodMetric | tuple[PodMetric, ...]] = {}
        """``podsMetric`` entries by pod name (a tuple of them where pods of several namespaces share a
        name)."""
        self.node_usage: Vec | None = None
        self.prod_usage = [0, 0]
        self.reported_aggregated: tuple[AggregatedUsage, ...] | None = None
        """``nodeMetric.aggregatedNodeUsages`` as reported (``None`` without ``nodeMetric``)."""
        self._agg: dict[tuple[str, float], Vec | None] = {}
        self.node_delta = [0, 0]
        self.prod_delta = [0, 0]
        self.node_estimated = [0, 0]

    def set_report(
        self, pods_metric: tuple[PodMetric, ...], aggregated: tuple[AggregatedUsage, ...] | None
    ) -> None:
        """Take a report's per-pod entries and aggregated usages (call :meth:`rebuild` after)."""
        index: dict[str, PodMetric | tuple[PodMetric, ...]] = {}
        for entry in pods_metric:
            seen = index.get(entry.name)
            index[entry.name] = (
                entry if seen is None else (*(seen if isinstance(seen, tuple) else (seen,)), entry)
            )
        self.pod_metrics = index
        self.reported_aggregated = aggregated
        self._agg = {}

    def pod_usage(self, p: PodAssign) -> PodUsage | None:
        """The pod's usage as the report gives it (the last entry of its namespace and name)."""
        meta = p.pod.get("metadata") or {}
        entry = self.pod_metrics.get(str(meta.get("name") or ""))
        if entry is None:
            return None
        namespace = str(meta.get("namespace") or "")
        for m in reversed(entry) if isinstance(entry, tuple) else (entry,):
            if m.namespace == namespace:
                return (m.usage.cpu_milli, m.usage.memory_bytes, m.priority == PROD)
        return None

    def aggregated(self, agg_type: str, duration: float) -> Vec | None:
        """The reported usage of an aggregation type over a window (0: the longest reported)."""
        key = (agg_type, duration)
        if key not in self._agg:
            self._agg[key] = self.every_aggregated().get(key)
        return self._agg[key]

    def every_aggregated(self) -> dict[tuple[str, float], Vec]:
        if self.reported_aggregated is None:
            return {}
        return aggregated_usages(self.reported_aggregated)

    def _should(self, p: PodAssign, u: PodUsage | None) -> bool:
        if u is None or self.update_time is None:
            return True
        return self.update_time - self.report_interval < p.timestamp or (
            p.deadline > 0 and p.deadline > self.update_time
        )

    def _counts(self, p: PodAssign) -> tuple[bool, bool]:
        """Whether ``p`` counts in the node delta and in the prod delta (:meth:`add`'s conditions); its
        estimate counts in ``node_estimated`` whenever it has one."""
        e = p.estimated
        if e is None:
            return False, False
        u = self.pod_usage(p)
        should = self._should(p, u)
        node_delta = should and _positive(e, u)
        if not p.prod:
            return node_delta, False
        if u is not None and not u[2]:
            u, should = None, True
        return node_delta, should and _positive(e, u)

    def add(self, p: PodAssign, sign: int = 1) -> None:
        """Koordinator's ``addPod`` (``sign=1``) and its exact reverse ``deletePod`` (``sign=-1``)."""
        u = self.pod_usage(p)
        active_prod = p.prod and u is not None and u[2]
        if active_prod and u is not None:
            self.prod_usage[0] += sign * u[0]
            self.prod_usage[1] += sign * u[1]
        e = p.estimated
        if e is None:
            return
        should = self._should(p, u)
        if should:
            _add_delta(self.node_delta, e, u, sign)
        self.node_estimated[0] += sign * e[0]
        self.node_estimated[1] += sign * e[1]
        if not p.prod:
            return
        if not active_prod and u is not None:
            u, should = None, True
        if should:
            _add_delta(self.prod_delta, e, u, sign)

    def counted(self) -> tuple[list[str], list[str], list[str]]:
        """The pods (``namespace/name``, sorted) in the node delta, in the prod delta, and estimated."""
        node, prod, estimated = [], [], []
        for p in self.pods.values():
            if p.estimated is None:
                continue
            in_node, in_prod = self._counts(p)
            if in_node:
                node.append(p.key)
            if in_prod:
                prod.append(p.key)
            estimated.append(p.key)
        return sorted(node), sorted(prod), sorted(estimated)

    def existing(self, prod: bool, agg_type: str, agg_duration: float) -> Vec:
        """prod: reported prod usage + prod deltas. Otherwise the base is the node usage (or the requested
        aggregation window, falling back to the node usage when the longest window is asked for and none
        exists yet) plus the deltas; without a base (a specific window not reported) the full estimates
        (``GetNodeMetricAndEstimatedOfExisting``)."""
        if prod:
            pu, pd = self.prod_usage, self.prod_delta
            return (pu[0] + pd[0], pu[1] + pd[1])
        base = self.node_usage
        if agg_type:
            base = self.aggregated(agg_type, agg_duration)
            if base is None and agg_duration == 0:
                base = self.node_usage
        if base is None:
            e = self.node_estimated
            return (e[0], e[1])
        d = self.node_delta
        return (base[0] + d[0], base[1] + d[1])

    def rebuild(self) -> None:
        self.node_delta, self.prod_delta, self.node_estimated = [0, 0], [0, 0], [0, 0]
        for p in self.pods.values():
            self.add(p)


def _positive(e: Vec, u: PodUsage | None) -> bool:
    """``max(0, e - u)`` is above 0 for some resource."""
    return any(e[i] - (u[i] if u is not None else 0) > 0 for i in (0, 1))


def _add_delta(acc: list[int], e: Vec, u: PodUsage | None, sign: int) -> None:
    """``acc +- max(0, e - u)`` per resource."""
    for i in (0, 1):
        d = e[i] - (u[i] if u is not None else 0)
        if d > 0:
            acc[i] += sign * d


def aggregated_usages(reported: tuple[AggregatedUsage, ...]) -> dict[tuple[str, float], Vec]:
    """Every reported (type, window) usage, plus ``(type, 0)`` aliasing the longest window of a type."""
    out: dict[tuple[str, float], Vec] = {}
    longest: dict[str, float] = {}
    for entry in reported:
        for typ, usage in entry.usage.items():
            out[(typ, entry.duration_seconds)] = (usage.cpu_milli, usage.memory_bytes)
            if entry.duration_seconds > longest.get(typ, 0.0):
                longest[typ] = entry.duration_seconds
    for typ, d in longest.items():
        out[(typ, 0.0)] = out[(typ, d)]
    return out
