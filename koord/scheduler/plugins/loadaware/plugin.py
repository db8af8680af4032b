"""``LoadAwareScheduling``: filter out nodes whose real load would pass a threshold with the pod on them,
and prefer the least used (Koordinator's ``load_aware.go``, same formulas, same integer arithmetic).

Filter: DaemonSet pods pass; the thresholds are the args overridden by the node annotation, the prod
ones for a prod pod when set, else the aggregated ones when set; a node without NodeMetric passes; an
expired NodeMetric rejects ("node(s) nodeMetric expired") or passes per the args; otherwise
``round(used / allocatable * 100) > threshold`` rejects, ``used`` being the cache's existing load plus
the incoming pod's estimate. Score: 0 without a fresh NodeMetric, else
``(sum w_r*leastUsed_r + D*min_r leastUsed_r) / (sum w_r + D)`` with ``leastUsed = (cap - used)*100 / cap``.
Reserve records the pod in the assign cache (the extender calls it from ``/bind``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koord.scheduler.framework import CodedVerdicts, CycleState, Handle, NodeInfo, NodeSet, Obj, Status
from koord.scheduler.plugins.loadaware import batch
from koord.scheduler.plugins.loadaware.args import (
    RESOURCES,
    LoadAwareSchedulingArgs,
    Vec,
    parse_args,
    to_vec,
)
from koord.scheduler.plugins.loadaware.assigncache import PodAssignCache
from koord.scheduler.plugins.loadaware.batch import MAX_SCORE, NodeFacts
from koord.scheduler.plugins.loadaware.estimator import estimate_with_args, node_capacity
from koord.scheduler.plugins.loadaware.table import NO_NODE
from koord.scheduler.plugins.loadaware.thresholds import args_profile, node_profile
from koordshared.apis.core.pod import as_map, is_daemonset_pod
from koordshared.apis.extension import qos as extension

__all__ = ["MAX_SCORE", "NAME", "LoadAwareScheduling", "NodeFacts", "PodFacts"]

NAME = "LoadAwareScheduling"
STATE_KEY = "IncomingPodEstimated" + NAME
REASON_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE = "node(s) %s usage exceed threshold"
REASON_AGG_USAGE = "node(s) %s aggregated usage exceed threshold"

EXPIRED = Status.unschedulable(REASON_EXPIRED)
OVER = tuple(Status.unschedulable(REASON_USAGE % r) for r in RESOURCES)
AGG_OVER = tuple(Status.unschedulable(REASON_AGG_USAGE % r) for r in RESOURCES)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The incoming pod, judged once per scheduling attempt (kept in the cycle state)."""

    daemonset: bool
    prod: bool
    estimate: Vec


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
        # Two profiles may run this plugin with different args over one snapshot: its memo and column
        # are its own.
        self._memo = f"{NAME}@{id(self):x}"
        self._column = f"{NAME}/facts@{id(self):x}"
        expired = None if self.args.enable_schedule_when_node_metrics_expired else EXPIRED
        answers = [None, expired, OVER[0], OVER[1], *AGG_OVER]
        self._answers: tuple[Status | None, ...] = tuple(answers)
        """A Status (or None) per :mod:`.batch` filter code: thousands of nodes answered as codes."""
        cache = self.cache
        self._score_column = cache.agg_column(self._score_agg) if self._score_agg[0] else -1
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
        facts = node_info.memo.get(self._memo)
        if facts is None:
            facts = NodeFacts.of(node_capacity(node_info.node), node_profile(self._profile, node_info.node))
            node_info.memo[self._memo] = facts
        assert isinstance(facts, NodeFacts)
        return facts

    def _facts_row(self, node_info: NodeInfo) -> tuple[float, ...]:
        if node_info.node is None:
            return batch.facts_row(NO_NODE, None, -1)
        slot = self.cache.slot(node_info.name)
        nf = self.node_facts(node_info)
        agg = nf.profile.aggregated
        column = (
            self.cache.agg_column((agg.aggregation_type, agg.duration))
            if agg is not None and nf.agg_limits is not None
            else -1
        )
        return batch.facts_row(slot, nf, column)

    def _gather(self, nodes: Sequence[NodeInfo]) -> tuple[np.ndarray, batch.Loads]:
        """The nodes' :data:`~.batch.FACTS` (the snapshot's column when the nodes are its rows) and
        the assign cache's sums for them."""
        if not isinstance(nodes, NodeSet):
            snapshot = getattr(self.handle, "snapshot", None)
            nodes = NodeSet.of(snapshot() if callable(snapshot) else None, nodes)
        facts = nodes.column(self._column, self._facts_row, batch.FACTS)
        if facts is None:
            facts = batch.facts_array([self._facts_row(ni) for ni in nodes])
        slots = facts[:, batch.SLOT].astype(np.int64)
        with self.cache.reading():
            loads = batch.Loads(self.cache.table.gather(slots))
        return facts, loads

    # ---- extension points -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        self.pod_facts(state, pod)
        return None

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        return self.filter_nodes(state, pod, (node_info,))[0]

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> CodedVerdicts:
        facts = state.get(STATE_KEY) or self.pod_facts(state, pod)
        if facts.daemonset or not len(nodes):
            return CodedVerdicts(np.zeros(len(nodes), dtype=np.int64), self._answers)
        rows, loads = self._gather(nodes)
        args = self.args
        expired = (
            loads.expired(self.handle.now(), args.node_metric_expiration_seconds)
            if args.filter_expired_node_metrics
            else None
        )
        codes = batch.filter_codes(rows, loads, facts.estimate, facts.prod, expired)
        return CodedVerdicts(codes, self._answers)

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        self.pod_facts(state, pod)
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return int(self.score_nodes(state, pod, (node_info,))[0])

    def score_nodes(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> np.ndarray:
        if (self._dominant == 0 and self._weights == (0, 0)) or not len(nodes):
            return np.zeros(len(nodes), dtype=np.int64)
        facts = state.get(STATE_KEY) or self.pod_facts(state, pod)
        rows, loads = self._gather(nodes)
        prod_pod = self.args.score_according_prod_usage and facts.prod
        if prod_pod:
            used = loads.prod
        elif self._score_column >= 0:
            used = loads.aggregated(np.full(len(rows), self._score_column))
        else:
            used = loads.plain
        expired = loads.expired(self.handle.now(), self.args.node_metric_expiration_seconds)
        valid = (rows[:, batch.KNOWN] > 0) & loads.measured & ~expired
        return batch.scores(rows, used, valid, facts.estimate, self._weights, self._dominant)

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        self.cache.reserve(node_name, pod)
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
