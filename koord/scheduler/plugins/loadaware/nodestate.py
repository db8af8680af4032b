"""One node's side of the assign cache: its latest NodeMetric (usage, aggregated windows, per-pod usage),
its cached pods and the sums LoadAware reads (Koordinator's ``nodeInfo`` with ``addPod``/``deletePod``).
Not thread-safe by itself: :class:`~koord.scheduler.plugins.loadaware.assigncache.PodAssignCache`
holds the lock around every use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.plugins.loadaware.args import Vec

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodAssign:
    """One cached pod: what addPod/deletePod need, computed once when the pod is (re)assigned."""

    uid: str
    key: str
    """``namespace/name``: the NodeMetric reports pods by name."""
    pod: Obj
    timestamp: float
    estimated: Vec | None
    deadline: float
    """Forced-estimation deadline (0: none)."""
    prod: bool


class NodeState:
    __slots__ = (
        "agg",
        "has_metric",
        "has_node_metric",
        "node_delta",
        "node_delta_pods",
        "node_estimated",
        "node_estimated_pods",
        "node_usage",
        "pod_usages",
        "pods",
        "prod_delta",
        "prod_delta_pods",
        "prod_pods",
        "prod_usage",
        "report_interval",
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
        self.pod_usages: dict[str, Vec] = {}
        self.prod_pods: set[str] = set()
        self.node_usage: Vec | None = None
        self.prod_usage = [0, 0]
        self.agg: dict[tuple[str, float], Vec] = {}
        self.node_delta = [0, 0]
        self.prod_delta = [0, 0]
        self.node_estimated = [0, 0]
        self.node_delta_pods: set[str] = set()
        self.prod_delta_pods: set[str] = set()
        self.node_estimated_pods: set[str] = set()

    def _should(self, p: PodAssign, u: Vec | None) -> bool:
        if u is None or self.update_time is None:
            return True
        return self.update_time - self.report_interval < p.timestamp or (
            p.deadline > 0 and p.deadline > self.update_time
        )

    def add(self, p: PodAssign, sign: int = 1) -> None:
        """Koordinator's ``addPod`` (``sign=1``) and its exact reverse ``deletePod`` (``sign=-1``)."""
        u = self.pod_usages.get(p.key)
        active_prod = p.prod and p.key in self.prod_pods
        if active_prod and u is not None:
            self.prod_usage[0] += sign * u[0]
            self.prod_usage[1] += sign * u[1]
        e = p.estimated
        if e is None:
            return
        should = self._should(p, u)
        if should and _add_delta(self.node_delta, e, u, sign):
            _mark(self.node_delta_pods, p.key, sign)
        self.node_estimated[0] += sign * e[0]
        self.node_estimated[1] += sign * e[1]
        _mark(self.node_estimated_pods, p.key, sign)
        if not p.prod:
            return
        if not active_prod and u is not None:
            u, should = None, True
        if should and _add_delta(self.prod_delta, e, u, sign):
            _mark(self.prod_delta_pods, p.key, sign)

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
            base = self.agg.get((agg_type, agg_duration))
            if base is None and agg_duration == 0:
                base = self.node_usage
        if base is None:
            e = self.node_estimated
            return (e[0], e[1])
        d = self.node_delta
        return (base[0] + d[0], base[1] + d[1])

    def rebuild(self) -> None:
        self.node_delta, self.prod_delta, self.node_estimated = [0, 0], [0, 0], [0, 0]
        self.node_delta_pods, self.prod_delta_pods, self.node_estimated_pods = set(), set(), set()
        for p in self.pods.values():
            self.add(p)


def _add_delta(acc: list[int], e: Vec, u: Vec | None, sign: int) -> bool:
    """``acc +- max(0, e - u)`` per resource; whether anything changed."""
    changed = False
    for i in (0, 1):
        d = e[i] - (u[i] if u is not None else 0)
        if d > 0:
            acc[i] += sign * d
            changed = True
    return changed


def _mark(pods: set[str], key: str, sign: int) -> None:
    if sign > 0:
        pods.add(key)
    else:
        pods.discard(key)
