"""``LoadAwareScheduling``: filter out nodes whose real load would pass a threshold with the pod on them,
and prefer the least used (Koordinator's ``load_aware.go``, same formulas, same integer arithmetic).

Filter: DaemonSet pods pass; the thresholds are the args overridden by the node annotation, the prod
ones for a prod pod when set, else the aggregated ones when set; a node without NodeMetric passes; an
expired NodeMetric rejects ("node(s) nodeMetric expired") or passes per the args; otherwise
``round(used / allocatable * 100) > threshold`` rejects, ``used`` being the cache's existing load plus
the incoming pod's estimate. Score: 0 without a fresh NodeMetric, else
``(sum w_r*leastUsed_r + D*min_r leastUsed_r) / (sum w_r + D)`` with ``leastUsed = (cap - used)*100 / cap``.
Reserve records the pod in the assign cache (the extender calls it from ``/bind``).

One difference: a node the extender's cache does not know yet passes and scores 0 (Koordinator's
in-process plugin never sees one; here kube-scheduler's node cache may be a moment ahead of ours).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koord.apis import extension
from koord.apis.pod import as_map, is_daemonset_pod
from koord.scheduler.framework import CycleState, Handle, NodeInfo, Obj, Status
from koord.scheduler.plugins.loadaware.args import (
    RESOURCES,
    LoadAwareSchedulingArgs,
    Vec,
    parse_args,
    to_vec,
)
from koord.scheduler.plugins.loadaware.assigncache import PodAssignCache
from koord.scheduler.plugins.loadaware.estimator import estimate_with_args, node_capacity
from koord.scheduler.plugins.loadaware.thresholds import FilterProfile, args_profile, node_profile

NAME = "LoadAwareScheduling"
STATE_KEY = "IncomingPodEstimated" + NAME
REASON_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE = "node(s) %s usage exceed threshold"
REASON_AGG_USAGE = "node(s) %s aggregated usage exceed threshold"
MAX_SCORE = 100

EXPIRED = Status.unschedulable(REASON_EXPIRED)
OVER = tuple(Status.unschedulable(REASON_USAGE % r) for r in RESOURCES)
AGG_OVER = tuple(Status.unschedulable(REASON_AGG_USAGE % r) for r in RESOURCES)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The incoming pod, judged once per scheduling attempt (kept in the cycle state)."""

    daemonset: bool
    prod: bool
    estimate: Vec


Limits = tuple[float, float]
"""Per resource, the usage percentage at which a node fails: ``round(x) > t`` is ``x >= t + 0.5``
(exact, unlike adding 0.5 in floating point); ``inf`` where the threshold or the capacity is 0."""


def _limits(thresholds: Vec, capacity: Vec) -> Limits | None:
    """``None`` when every threshold is 0 (the filter is off for this profile)."""
    if thresholds == (0, 0):
        return None
    lim = [t + 0.5 if t > 0 and c > 0 else math.inf for t, c in zip(thresholds, capacity, strict=True)]
    return (lim[0], lim[1])


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What LoadAware derives from one Node object (memoized on its NodeInfo)."""

    capacity: Vec
    profile: FilterProfile
    usage_limits: Limits | None
    prod_limits: Limits | None
    agg_limits: Limits | None
    divisor: Vec
    """The capacity with 0 replaced by 1, so a resource without capacity divides safely (its limit is inf)."""

    @classmethod
    def of(cls, capacity: Vec, profile: FilterProfile) -> NodeFacts:
        agg = profile.aggregated
        return cls(
            capacity,
            profile,
            _limits(profile.usage, capacity),
            _limits(profile.prod, capacity),
            _limits(agg.thresholds, capacity) if agg is not None else None,
            (capacity[0] or 1, capacity[1] or 1),
        )


class LoadAwareScheduling:
    """The plugin; ``LoadAwareScheduling(args, handle)`` is its factory."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        self.args: LoadAwareSchedulingArgs = parse_args(args)
        self.handle = handle
        self.cache = PodAssignCache(self.args, handle.now)
        self._profile = args_profile(self.args)
        self._weights = to_vec(self.args.resource_weights)
        self._dominant = self.args.dominant_resource_weight
        agg = self.args.aggregated
        self._score_agg = (
            (agg.score_aggregation_type, agg.score_aggregated_duration)
            if agg is not None and agg.score_aggregation_type
            else ("", 0.0)
        )
        cache = self.cache
        handle.on_pods(cache.on_pod_add, cache.on_pod_update, cache.on_pod_delete)
        handle.on_node_metrics(
            cache.set_node_metric, lambda _old, new: cache.set_node_metric(new), cache.delete_node_metric
        )

    # ---- per pod and per node facts -------------------------------------------------------------

    def pod_facts(self, state: CycleState, pod: Obj) -> PodFacts:
        facts = state.get(STATE_KEY)
        if facts is None:
            prio, est = estimate_with_args(pod, self.args)
            facts = PodFacts(is_daemonset_pod(pod), prio is extension.PriorityClass.PROD, est)
            state.write(STATE_KEY, facts)
        assert isinstance(facts, PodFacts)
        return facts

    def node_facts(self, node_info: NodeInfo) -> NodeFacts:
        facts = node_info.memo.get(NAME)
        if facts is None:
            facts = NodeFacts.of(node_capacity(node_info.node), node_profile(self._profile, node_info.node))
            node_info.memo[NAME] = facts
        assert isinstance(facts, NodeFacts)
        return facts

    # ---- extension points -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        self.pod_facts(state, pod)
        return None

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod, (node_info,))[0]

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> list[Status | None]:
        """The filter over many nodes at once (same answers as :meth:`filter` node by node): the pod's
        facts, the clock and the cache lock are taken once per call, not once per node."""
        facts = state.get(STATE_KEY) or self.pod_facts(state, pod)
        if facts.daemonset:
            return [None] * len(nodes)
        args = self.args
        now, expiration = self.handle.now(), args.node_metric_expiration_seconds
        check_expired = args.filter_expired_node_metrics
        expired_answer = None if args.enable_schedule_when_node_metrics_expired else EXPIRED
        est_cpu, est_mem = facts.estimate
        prod = facts.prod
        out: list[Status | None] = []
        append = out.append
        with self.cache.reading() as states:
            get = states.get
            for ni in nodes:
                n = get(ni.name)
                if n is None or not n.has_metric or ni.node is None:
                    append(None)  # no NodeMetric (or an unknown node): no load-awareness here
                    continue
                nf = ni.memo.get(NAME) or self.node_facts(ni)
                agg = None
                if prod and nf.prod_limits is not None:
                    limits = nf.prod_limits
                elif nf.agg_limits is not None:
                    limits, agg = nf.agg_limits, nf.profile.aggregated
                else:
                    limits = nf.usage_limits
                if limits is None:
                    append(None)
                    continue
                t = n.status_time
                if check_expired and (t is None or (expiration > 0 and now - t >= expiration)):
                    append(expired_answer)
                    continue
                if not n.has_node_metric:
                    append(None)
                    continue
                if agg is not None:
                    used = n.existing(False, agg.aggregation_type, agg.duration)
                else:
                    used = n.existing(prod and nf.prod_limits is not None, "", 0.0)
                div = nf.divisor
                if (used[0] + est_cpu) / div[0] * 100 >= limits[0]:
                    append(AGG_OVER[0] if agg is not None else OVER[0])
                elif (used[1] + est_mem) / div[1] * 100 >= limits[1]:
                    append(AGG_OVER[1] if agg is not None else OVER[1])
                else:
                    append(None)
        return out

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        self.pod_facts(state, pod)
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return self.score_nodes(state, pod, (node_info,))[0]

    def score_nodes(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> list[int]:
        """The score over many nodes at once (same answers as :meth:`score` node by node)."""
        if self._dominant == 0 and self._weights == (0, 0):
            return [0] * len(nodes)
        facts = state.get(STATE_KEY) or self.pod_facts(state, pod)
        prod_pod = self.args.score_according_prod_usage and facts.prod
        agg_type, agg_duration = ("", 0.0) if prod_pod else self._score_agg
        now, expiration = self.handle.now(), self.args.node_metric_expiration_seconds
        est_cpu, est_mem = facts.estimate
        dominant, (w_cpu, w_mem) = self._dominant, self._weights
        weight_sum = w_cpu + w_mem + dominant
        out: list[int] = []
        append = out.append
        with self.cache.reading() as states:
            get = states.get
            for ni in nodes:
                n = get(ni.name)
                t = n.status_time if n is not None else None
                if (
                    n is None
                    or not n.has_metric
                    or ni.node is None
                    or t is None
                    or (expiration > 0 and now - t >= expiration)
                    or not n.has_node_metric
                ):
                    append(0)  # no NodeMetric, expired, or nothing reported: no opinion
                    continue
                cap_cpu, cap_mem = (ni.memo.get(NAME) or self.node_facts(ni)).capacity
                used = n.existing(prod_pod, agg_type, agg_duration)
                # Koordinator's loadAwareSchedulingScorer, inlined: this loop runs once per node per pod
                cpu, mem = used[0] + est_cpu, used[1] + est_mem
                lc = (cap_cpu - cpu) * MAX_SCORE // cap_cpu if cap_cpu and cpu <= cap_cpu else 0
                lm = (cap_mem - mem) * MAX_SCORE // cap_mem if cap_mem and mem <= cap_mem else 0
                total = lc * w_cpu + lm * w_mem
                if dominant:
                    total += min(lc, lm) * dominant
                append(total // weight_sum if weight_sum > 0 else 0)
        return out

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        self.cache.assign(node_name, pod)
        return None

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        self.cache.unassign(node_name, str(as_map(pod, "metadata").get("uid") or ""))

    def debug_node(self, node_name: str) -> dict[str, Any]:
        out = self.cache.debug(node_name)
        info = self.handle.node_info(node_name)
        if info is not None and info.node is not None:
            nf = self.node_facts(info)
            out["allocatable"] = list(nf.capacity)
            out["thresholds"] = {
                "usage": list(nf.profile.usage),
                "prod": list(nf.profile.prod),
                "aggregated": None
                if nf.profile.aggregated is None
                else {
                    "thresholds": list(nf.profile.aggregated.thresholds),
                    "type": nf.profile.aggregated.aggregation_type,
                    "durationSeconds": nf.profile.aggregated.duration,
                },
            }
        update = out.get("updateTime")
        if isinstance(update, float):
            out["ageSeconds"] = round(self.handle.now() - update, 3)
        return out
