"""The scheduling cycle of one pod (kube-scheduler's ``scheduleOne`` and ``schedulePod``), serial: take the
next pod, bring the snapshot up to date, PreFilter, Filter over the nodes from the rotating start index
until enough feasible nodes are found (``percentageOfNodesToScore``), PostFilter when none is, PreScore,
Score, NormalizeScore, pick the best (ties at random), assume the pod on the node, Reserve, Permit; then
hand the pod to the binding cycle, which runs on another thread and never blocks the next cycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from koord.scheduler.core.fiterror import Diagnosis, FitError
from koord.scheduler.framework.interface import Code, CycleState, Status
from koord.scheduler.framework.nominator import nominated_node_name
from koord.scheduler.framework.runtime import (
    NARROWED_BY,
    Framework,
    PluginFailure,
    call,
    go_list,
    select_host,
    weighted_total,
)
from koord.scheduler.framework.snapshot import NodeSet
from koord.scheduler.framework.types import Obj, PreFilterResult
from koord.scheduler.queue.podinfo import QueuedPodInfo

if TYPE_CHECKING:
    from koord.scheduler.core.scheduler import Scheduler

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int | None, num_all: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: every node below 100; else the given percentage, or
    the adaptive one (``50 - nodes/125``, at least 5 %), and at least 100 nodes."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    pct = percentage or 0
    if pct >= 100:
        return num_all
    if pct == 0:
        pct = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


def schedule_pod(sched: Scheduler, fw: Framework, state: CycleState, qpi: QueuedPodInfo) -> str:
    """The node for the pod, or :class:`FitError` (no node fits) / :class:`PluginFailure` (an error)."""
    pod = qpi.pod
    snapshot = sched.snapshot
    total = len(snapshot)
    diagnosis = Diagnosis()
    if total == 0:
        diagnosis.reject_all(Status.unresolvable("no nodes available to schedule pods"), 0)
        raise FitError(qpi.info.key, 0, diagnosis)
    ext = fw.extensions
    if ext.pre_filter:
        pod, rejected = ext.before_pre_filter(state, pod)
        if rejected is not None:
            if rejected.code is Code.ERROR:
                raise PluginFailure(rejected.plugin, "beforePreFilter", rejected.message)
            diagnosis.reject_all(rejected, total)
            raise FitError(qpi.info.key, total, diagnosis)
    result, rejected = fw.run_pre_filter(state, pod)
    if rejected is None and ext.pre_filter:
        rejected = ext.after_pre_filter(state, pod, result)
    if rejected is None and ext.prefer_nodes is not None:
        result, rejected = _preferred(sched, fw, state, pod, result)
    if rejected is not None:
        if not rejected.is_rejected:
            raise PluginFailure(rejected.plugin, "preFilter", rejected.message or rejected.code.name)
        diagnosis.reject_all(rejected, total)
        raise FitError(qpi.info.key, total, diagnosis)
    allowed = None if result is None else result.node_names
    nominated = nominated_node_name(pod)
    if nominated and (allowed is None or nominated in allowed):
        info = snapshot.node_info(nominated)
        if info is not None and fw.filter_one(state, pod, info) is None:
            return nominated
    nodes = snapshot.rotated(sched.next_start_node_index)
    if allowed is not None:
        nodes = nodes.subset(_allowed_mask(nodes, allowed))
    percentage = fw.profile.percentage_of_nodes_to_score
    if percentage is None:
        percentage = sched.config.percentage_of_nodes_to_score
    want = num_feasible_nodes_to_find(percentage, len(nodes)) if fw.has("score") else 1
    found = fw.find_feasible(state, pod, nodes, want)
    if total:
        sched.next_start_node_index = (sched.next_start_node_index + found.processed) % total
    feasible = found.feasible
    if not len(feasible):
        diagnosis.record(found.statuses())
        if allowed is not None:
            outside = total - len(nodes)
            if outside:
                # kube-scheduler's status for the nodes a PreFilter result left out (findNodesThatFitPod).
                by = state.get(NARROWED_BY) or ()
                diagnosis.unschedulable_plugins.update(by)
                text = f"node(s) didn't satisfy plugin(s) {go_list(by)}"
                why = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (text,))
                for ni in snapshot.node_infos():
                    if ni.name not in allowed:
                        diagnosis.statuses[ni.name] = why
        raise FitError(qpi.info.key, total, diagnosis)
    if len(feasible) == 1:
        return feasible.info(0).name
    if ext.score:
        pod, transformed, _ = ext.before_score(state, pod, feasible)
        feasible = transformed if isinstance(transformed, NodeSet) else NodeSet.of(snapshot, transformed)
    fw.run_pre_score(state, pod, feasible)
    scores = fw.plugin_scores(state, pod, feasible)
    totals = weighted_total(scores, len(feasible))
    return feasible.info(select_host(feasible, totals, sched.rng)).name


def _preferred(
    sched: Scheduler, fw: Framework, state: CycleState, pod: Obj, result: PreFilterResult | None
) -> tuple[PreFilterResult | None, Status | None]:
    """Koordinator's ``RunPreferNodesPlugin``: the first preferred node that passes every filter (after
    the BeforeFilter transformers, with the pods nominated there) becomes the only candidate."""
    plugin = fw.extensions.prefer_nodes
    assert plugin is not None
    answer = call(plugin.name, "preferNodes", plugin.prefer_nodes, state, pod, result)
    if isinstance(answer, Status):
        passed = answer.code is Code.SKIP or answer.is_success
        return result, None if passed else answer.with_plugin(plugin.name)
    for name in answer:
        info = sched.snapshot.node_info(name)
        if info is None:
            continue
        p, ni, _ = fw.extensions.before_filter(state, pod, info)
        if fw.filter_one(state, p, ni) is None:
            return PreFilterResult(frozenset((name,))), None
    return result, None


def _post_filter_statuses(sched: Scheduler, fit: FitError) -> Mapping[str, Status]:
    """Why each node failed, as PostFilter reads it: a PreFilter rejection counts on every node (a node
    without a status failed unresolvably)."""
    rejected = fit.diagnosis.pre_filter
    if rejected is None:
        return fit.diagnosis.statuses
    return {ni.name: rejected for ni in sched.snapshot.node_infos()}


def _allowed_mask(nodes: NodeSet, allowed: frozenset[str]) -> np.ndarray:
    return np.fromiter((ni.name in allowed for ni in nodes), dtype=bool, count=len(nodes))


def schedule_one(sched: Scheduler, qpi: QueuedPodInfo) -> None:
    """One pod's scheduling cycle; failures go back to the queue through ``sched.failure``."""
    start = time.perf_counter()
    pod = qpi.pod
    fw = sched.framework_for(pod)
    if fw is None or sched.skip(qpi):
        sched.queue.done(qpi.uid)
        return
    state = CycleState(qpi.info)
    sched.cache.update_snapshot(sched.snapshot)
    try:
        node = schedule_pod(sched, fw, state, qpi)
    except FitError as fit:
        nominated: str | None = None
        if fw.has("postFilter") and fit.num_nodes:
            try:
                result, post = fw.run_post_filter(state, pod, _post_filter_statuses(sched, fit))
            except PluginFailure as err:
                sched.failure(fw, qpi, err, start, error=True)
                return
            if not post.is_success:
                fit.diagnosis.post_filter_message = post.message
            nominated = result.nominated_node_name if result is not None else None
        fw.extensions.after_post_filter(state, pod, fit.diagnosis.statuses)
        sched.failure(fw, qpi, fit, start, nominated=nominated)
        return
    except PluginFailure as err:
        sched.failure(fw, qpi, err, start, error=True)
        return
    sched.cache.assume_pod(qpi.info, node)
    sched.nominator.delete(qpi.uid)
    reserved = fw.run_reserve(state, pod, node)
    if reserved is not None:
        sched.forget(qpi)
        sched.failure(fw, qpi, reserved, start, error=reserved.code is Code.ERROR)
        return
    st: Status | None
    try:
        st, waits = fw.run_permit(state, pod, node)
    except PluginFailure as err:
        st, waits = Status(Code.ERROR, (str(err),), err.plugin), {}
    if st is not None and st.code is not Code.WAIT:
        fw.run_unreserve(state, pod, node)
        sched.forget(qpi)
        sched.failure(fw, qpi, st, start, error=st.code is Code.ERROR)
        return
    sched.queue.done(qpi.uid)
    if waits:
        sched.wait_on_permit(fw, state, qpi, node, waits, start, st.reasons if st is not None else ())
    else:
        sched.submit_binding(fw, state, qpi, node, start)
