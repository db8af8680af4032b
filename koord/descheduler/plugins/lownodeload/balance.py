"""Moving load from the abnormal source nodes to the under-used ones (Koordinator's
``evictPodsFromSourceNodes``, ``balancePods``, ``podFitsAnyNodeWithThreshold`` and ``evictPods``).

Capacity to move is ``Σ (high threshold - usage)`` over the targets, per resource. The node pass moves
from the node-view sources to the low and both-low nodes; the prod pass then moves from the prod sources
to the prod-low and both-low nodes, with the both-low share capped by what the node pass left.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from koord.descheduler.framework.interface import EvictOptions, Evictor, Obj
from koord.descheduler.framework.nodefit import NodeFit
from koord.descheduler.plugins.lownodeload.sorter import PodFacts, sort_pods
from koord.descheduler.plugins.lownodeload.usage import NodeUsage, Vec, metric_vec, over
from koordshared.apis.core import pod as podutil

log = logging.getLogger(__name__)


@dataclass
class Pass:
    """Everything one balancing pass needs besides the nodes."""

    pool: str
    plugin: str
    names: Sequence[str]
    """The resources thresholds are set for."""
    weights: Mapping[str, int]
    facts: Mapping[str, PodFacts]
    pod_filter: Callable[[Obj], bool]
    evictor: Evictor
    node_fit: NodeFit | None
    """``None`` when ``nodeFit`` is off."""
    dry_run: bool
    reason: Callable[[NodeUsage, bool], str]
    on_normal: Callable[[NodeUsage, bool], None]
    """Called when a source drops under its high thresholds (its detector is reset)."""
    evicted: list[tuple[str, str, str]]
    """(pod key, node, reason) of every eviction carried out (or decided, in a dry run)."""


def available(nodes: Sequence[NodeUsage], names: Sequence[str], prod: bool) -> Vec:
    """``targetAvailableUsage``: ``Σ (high - usage)`` per resource (negative when a target is over)."""
    out = dict.fromkeys(names, 0)
    for n in nodes:
        usage, high = n.view(prod)
        for r in names:
            out[r] += high[r] - usage[r]
    return out


class Targets:
    """The targets of one pass, searched next-fit (see the module docstring)."""

    def __init__(self, nodes: Sequence[NodeUsage], p: Pass, prod: bool) -> None:
        self.nodes = list(nodes)
        self.p = p
        self.prod = prod
        self._next = 0

    def _fits(self, pod: Obj, add: Mapping[str, int], t: NodeUsage) -> bool:
        usage, high = t.view(self.prod)
        if any(r in usage and usage[r] + add.get(r, 0) > thr for r, thr in high.items()):
            return False
        return self.p.node_fit is None or self.p.node_fit.fits(pod, t.node)

    def find(self, pod: Obj, metric: tuple[int, int]) -> NodeUsage | None:
        """The first target, from the last one used, that fits ``pod`` (``podFitsAnyNodeWithThreshold``)."""
        add = metric_vec(metric, self.p.names)
        n = len(self.nodes)
        for k in range(n):
            t = self.nodes[(self._next + k) % n]
            if self._fits(pod, add, t):
                self._next = (self._next + k) % n
                return t
        return None

    def reserve(self, t: NodeUsage, metric: tuple[int, int], sign: int = 1) -> None:
        """Add (``sign`` -1: take back) a moved pod's usage to the target's view."""
        usage = t.view(self.prod)[0]
        for r, q in metric_vec(metric, self.p.names).items():
            if r in usage:
                usage[r] += sign * q


def _continue(node: NodeUsage, capacity: Vec, p: Pass, prod: bool) -> bool:
    """``continueEvictionCond``."""
    usage, high = node.view(prod)
    if not over(usage, high):
        p.on_normal(node, prod)
        return False
    return all(capacity.get(r, 1) > 0 for r in p.names)


def evict_pods(pods: Sequence[Obj], node: NodeUsage, capacity: Vec, targets: Targets) -> None:
    p, prod = targets.p, targets.prod
    held = 0
    try:
        for pod in pods:
            if not _continue(node, capacity, p, prod):
                return
            if not p.pod_filter(pod) or not p.evictor.pre_eviction_filter(pod):
                held += 1
                continue
            _evict_one(pod, node, capacity, targets)
    finally:
        if held:
            log.info(
                "%s: %d pod(s) on %s held back by the evictor's limits",
                p.pool,
                held,
                node.name,
            )


def _evict_one(pod: Obj, node: NodeUsage, capacity: Vec, targets: Targets) -> None:
    """Evict ``pod`` (reserving room on a target first, with ``nodeFit``); on success take its usage off
    the capacity and the node."""
    p, prod = targets.p, targets.prod
    key = podutil.pod_key(pod)
    metric = node.pod_metrics.get(key)
    target = None
    if p.node_fit is not None and metric is not None:
        target = targets.find(pod, metric)
        if target is None:
            log.info("%s: no target has room for %s any more", p.pool, key)
            return
        targets.reserve(target, metric)
    reason = p.reason(node, prod)
    if not p.evictor.evict(pod, EvictOptions(plugin=p.plugin, reason=reason, dry_run=p.dry_run)):
        if target is not None and metric is not None:
            targets.reserve(target, metric, -1)
        return
    p.evicted.append((key, node.name, reason))
    if metric is None:
        return
    moved = metric_vec(metric, capacity)
    for r in capacity:
        q = 1 if r == "pods" else moved[r]
        capacity[r] -= q
        if r in node.usage:
            node.usage[r] -= q
        if prod and r in node.prod_usage:
            node.prod_usage[r] -= q


def balance(
    sources: Sequence[NodeUsage], targets: Sequence[NodeUsage], capacity: Vec, p: Pass, prod: bool
) -> None:
    """``balancePods`` over the sorted ``sources``."""
    if not targets:
        log.info("%s: no target nodes for the %s view, nothing moved", p.pool, "prod" if prod else "node")
        return
    search = Targets(targets, p, prod)
    for src in sources:
        candidates = src.prod_pods if prod else src.pods
        removable = []
        for pod in candidates:
            if not p.pod_filter(pod):
                continue
            if p.node_fit is not None:
                metric = src.pod_metrics.get(podutil.pod_key(pod))
                if metric is None or search.find(pod, metric) is None:
                    continue
            removable.append(pod)
        log.info(
            "%s: %s (%s view) has %d pods, %d removable",
            p.pool,
            src.name,
            "prod" if prod else "node",
            len(candidates),
            len(removable),
        )
        if not removable:
            continue
        sort_pods(removable, p.facts, src, p.weights, prod)
        evict_pods(removable, src, capacity, search)


def evict_from_sources(
    sources: Sequence[NodeUsage],
    low: Sequence[NodeUsage],
    prod_sources: Sequence[NodeUsage],
    prod_low: Sequence[NodeUsage],
    both_low: Sequence[NodeUsage],
    p: Pass,
) -> None:
    """The node pass, then the prod pass (see the module docstring)."""
    node_capacity = available(low, p.names, False)
    both = available(both_low, p.names, False)
    for r in p.names:
        node_capacity[r] += both[r]
    prod_capacity = available(prod_low, p.names, True)
    prod_both = available(both_low, p.names, True)
    balance(sources, [*low, *both_low], node_capacity, p, False)
    for r in p.names:
        both[r] = min(both[r], node_capacity[r])  # what the node pass left of both-low's share
        prod_capacity[r] += min(prod_both[r], both[r])
    balance(prod_sources, [*prod_low, *both_low], prod_capacity, p, True)
