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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordlet import api
from koordlet.scheduler.framework import CycleState, Handle, NodeInfo, Obj, Status
from koordlet.scheduler.plugins.loadaware.args import (
    RESOURCES,
    LoadAwareSchedulingArgs,
    Vec,
    parse_args,
    to_vec,
)
from koordlet.scheduler.plugins.loadaware.assigncache import PodAssignCache
from koordlet.scheduler.plugins.loadaware.estimator import (
    estimate_pod,
    is_daemonset_pod,
    node_capacity,
    priority_class,
    round_half_away,
)
from koordlet.scheduler.plugins.loadaware.thresholds import FilterProfile, args_profile, node_profile
from koordlet.schema.pod import as_map

NAME = "LoadAwareScheduling"
STATE_KEY = "IncomingPodEstimated" + NAME
REASON_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE = "node(s) %s usage exceed threshold"
REASON_AGG_USAGE = "node(s) %s aggregated usage exceed threshold"
MAX_SCORE = 100

EXPIRED = Status.unschedulable(REASON_EXPIRED)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The incoming pod, judged once per scheduling attempt (kept in the cycle state)."""

    daemonset: bool
    prod: bool
    estimate: Vec


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What LoadAware derives from one Node object (memoized on its NodeInfo)."""

    capacity: Vec
    profile: FilterProfile


def least_used(used: int, capacity: int) -> int:
    if capacity == 0 or used > capacity:
        return 0
    return (capacity - used) * MAX_SCORE // capacity


def load_aware_score(dominant: int, weights: Vec, used: Vec, capacity: Vec) -> int:
    """Koordinator's ``loadAwareSchedulingScorer``: every resource takes part in the dominant minimum,
    weighted or not; integer division throughout."""
    node_score = weight_sum = dominant_score = 0
    if dominant != 0:
        dominant_score, weight_sum = MAX_SCORE, dominant
    for i in (0, 1):
        s = least_used(used[i], capacity[i])
        node_score += s * weights[i]
        weight_sum += weights[i]
        dominant_score = min(dominant_score, s)
    node_score += dominant_score * dominant
    if weight_sum <= 0:
        return 0
    return node_score // weight_sum


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
            prio = priority_class(pod)
            est = estimate_pod(
                pod,
                self.args.estimated_scaling_factors,
                prio,
                allow_customize=self.args.allow_customize_estimation,
            )
            facts = PodFacts(is_daemonset_pod(pod), prio is api.PriorityClass.PROD, est)
            state.write(STATE_KEY, facts)
        assert isinstance(facts, PodFacts)
        return facts

    def node_facts(self, node_info: NodeInfo) -> NodeFacts:
        facts = node_info.memo.get(NAME)
        if facts is None:
            facts = NodeFacts(node_capacity(node_info.node), node_profile(self._profile, node_info.node))
            node_info.memo[NAME] = facts
        assert isinstance(facts, NodeFacts)
        return facts

    def _expired(self, update_time: float | None) -> bool:
        if update_time is None:
            return True
        exp = self.args.node_metric_expiration_seconds
        return exp > 0 and self.handle.now() - update_time >= exp

    # ---- extension points -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        self.pod_facts(state, pod)
        return None

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        facts = state.get(STATE_KEY) or self.pod_facts(state, pod)
        if facts.daemonset or node_info.node is None:
            return None
        nf = node_info.memo.get(NAME) or self.node_facts(node_info)
        profile = nf.profile
        prod_pod = facts.prod and profile.prod != (0, 0)
        agg = None if prod_pod else profile.aggregated
        if prod_pod:
            thresholds = profile.prod
        elif agg is not None:
            thresholds = agg.thresholds
        else:
            thresholds = profile.usage
        if thresholds == (0, 0):
            return None
        existing = self.cache.existing(
            node_info.name, prod_pod, agg.aggregation_type if agg else "", agg.duration if agg else 0.0
        )
        if existing is None:
            return None  # no NodeMetric: no load-awareness on this node
        if self.args.filter_expired_node_metrics and self._expired(existing.update_time):
            return None if self.args.enable_schedule_when_node_metrics_expired else EXPIRED
        if not existing.has_node_metric:
            return None
        used, est, cap = existing.usage, facts.estimate, nf.capacity
        for i in (0, 1):
            limit, total = thresholds[i], cap[i]
            if limit == 0 or total == 0:
                continue
            # Go's math.Round(float64(estimated) / float64(total) * 100), same operation order.
            if round_half_away((used[i] + est[i]) / total * 100) > limit:
                return Status.unschedulable((REASON_AGG_USAGE if agg else REASON_USAGE) % RESOURCES[i])
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        if self._dominant == 0 and self._weights == (0, 0):
            return 0
        if node_info.node is None:
            return 0
        facts = state.get(STATE_KEY) or self.pod_facts(state, pod)
        prod_pod = self.args.score_according_prod_usage and facts.prod
        agg_type, agg_duration = ("", 0.0) if prod_pod else self._score_agg
        existing = self.cache.existing(node_info.name, prod_pod, agg_type, agg_duration)
        if existing is None or self._expired(existing.update_time) or not existing.has_node_metric:
            return 0
        nf = node_info.memo.get(NAME) or self.node_facts(node_info)
        used, est = existing.usage, facts.estimate
        return load_aware_score(
            self._dominant, self._weights, (used[0] + est[0], used[1] + est[1]), nf.capacity
        )

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
