"""The PodTopologySpread plugin: PreFilter/Filter (DoNotSchedule constraints), PreScore/Score/NormalizeScore
(ScheduleAnyway and default constraints), AddPod/RemovePod for preemption, and the cluster events that
may make a pod it rejected schedulable, with kube-scheduler's queueing hints
(``isSchedulableAfterPodChange``, ``isSchedulableAfterNodeChange``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import (
    QUEUE,
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    QueueingHint,
    Status,
)
from koord.scheduler.framework.events import NODE, POD
from koord.scheduler.framework.events import SKIP as QUEUE_SKIP
from koord.scheduler.framework.prepared import Prepared
from koord.scheduler.framework.snapshot import snapshot_of
from koord.scheduler.plugins.podtopologyspread.args import (
    DO_NOT_SCHEDULE,
    NAME,
    NAME_PREFIX,
    SCHEDULE_ANYWAY,
    parse_args,
)
from koord.scheduler.plugins.podtopologyspread.constraints import Constraint, constraints_of
from koord.scheduler.plugins.podtopologyspread.filtering import SpreadState
from koord.scheduler.plugins.podtopologyspread.scoring import ScoreState
from koordshared.apis.core.node import labels_of
from koordshared.apis.core.pod import as_list, as_map

PRE_FILTER_KEY = NAME_PREFIX + "PreFilter"
PRE_SCORE_KEY = NAME_PREFIX + "PreScore"


class PodTopologySpread(Prepared):
    """Filter, Score and the what-ifs come from :class:`Prepared`, over the states of PreFilter
    (:class:`SpreadState`) and PreScore (:class:`ScoreState`)."""

    name = NAME
    pre_filter_key = PRE_FILTER_KEY
    pre_score_key = PRE_SCORE_KEY

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args = parse_args(args)
        self.handle = handle

    def _constraints(self, pod: Obj, action: str, state: CycleState | None = None) -> tuple[Constraint, ...]:
        """The pod's constraints of ``action``; for the pod being scheduled, parsed once per pod object."""
        info = state.pod_info if state is not None else None
        if info is None or info.pod is not pod:
            return constraints_of(pod, action, self.args.defaults)
        key = f"{NAME_PREFIX}{action}/{id(self)}"  # profiles may differ in their default constraints
        found: tuple[Constraint, ...] | None = info.memo.get(key)
        if found is None:
            found = info.memo[key] = constraints_of(pod, action, self.args.defaults)
        return found

    # ---- PreFilter / Filter -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE, state)
        if not constraints:
            return SKIP
        state.write(PRE_FILTER_KEY, SpreadState.build(snapshot_of(self.handle), pod, constraints))
        return None

    # ---- PreScore / Score -------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        constraints = self._constraints(pod, SCHEDULE_ANYWAY, state)
        if not constraints:
            return SKIP
        snap = snapshot_of(self.handle)
        if not len(snap):
            return SKIP
        # Only the System defaults let a node without a zone still be scored by hostname.
        require_all = (
            bool(as_list(as_map(pod, "spec"), "topologySpreadConstraints")) or not self.args.system_defaulted
        )
        filtered = nodes if isinstance(nodes, NodeSet) else NodeSet.of(snap, nodes)
        state.write(PRE_SCORE_KEY, ScoreState.build(snap, pod, constraints, filtered, require_all))
        return None

    # ---- queueing hints ---------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        pod_actions = Action.ADD | Action.UPDATE_POD_LABEL | Action.UPDATE_POD_TOLERATIONS | Action.DELETE
        node_actions = Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT
        return (
            ClusterEventWithHint(ClusterEvent(POD, pod_actions), self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(NODE, node_actions), self._after_node_change),
        )

    def _after_pod_change(self, pod: Obj, old: Obj | None, new: Obj | None) -> QueueingHint:
        if any(p is not None and not _involved(p, pod) for p in (old, new)):
            return QUEUE_SKIP
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if old is not None and new is not None:
            if (
                _uid(new) == _uid(pod)
                and as_list(as_map(old, "spec"), "tolerations") != as_list(as_map(new, "spec"), "tolerations")
                and any(c.honor_taints for c in constraints)
            ):
                return QUEUE
            if labels_of(old) == labels_of(new):
                return QUEUE_SKIP
            changed = any(c.selector.matches(old) != c.selector.matches(new) for c in constraints)
            return QUEUE if changed else QUEUE_SKIP
        changed_pod = new if new is not None else old
        if changed_pod is not None and any(c.selector.matches(changed_pod) for c in constraints):
            return QUEUE
        return QUEUE_SKIP

    def _after_node_change(self, pod: Obj, old: Obj | None, new: Obj | None) -> QueueingHint:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        old_ok = old is not None and _has_keys(old, constraints)
        new_ok = new is not None and _has_keys(new, constraints)
        if old is not None and new is not None:
            if old_ok != new_ok:
                return QUEUE
            old_labels, new_labels = labels_of(old), labels_of(new)
            keys_changed = any(
                old_labels.get(c.topology_key) != new_labels.get(c.topology_key) for c in constraints
            )
            taints_changed = as_list(as_map(old, "spec"), "taints") != as_list(as_map(new, "spec"), "taints")
            return QUEUE if new_ok and (keys_changed or taints_changed) else QUEUE_SKIP
        return QUEUE if (new_ok if new is not None else old_ok) else QUEUE_SKIP


def _uid(pod: Obj) -> str:
    return str(as_map(pod, "metadata").get("uid") or "")


def _involved(changed: Obj, pod: Obj) -> bool:
    """kube-scheduler's ``involvedInTopologySpreading``: the pod itself, or a bound pod of its namespace."""
    if _uid(changed) == _uid(pod):
        return True
    same_ns = as_map(changed, "metadata").get("namespace") == as_map(pod, "metadata").get("namespace")
    return bool(as_map(changed, "spec").get("nodeName")) and same_ns


def _has_keys(node: Obj, constraints: Sequence[Constraint]) -> bool:
    labels = labels_of(node)
    return all(c.topology_key in labels for c in constraints)
