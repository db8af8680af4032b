"""The framework's answers about given nodes, for callers that ask rather than schedule: the extender
front end (``/filter``, ``/prioritize`` in kube-scheduler's extender terms), the explanation of why a
pod is or is not placed (``/debug/nodes``, ``koord-manager top nodes``, ``koord-scheduler explain``) and
the plugin authors' harness. Everything runs the cycle's own code (:mod:`.runtime`), so no view can
disagree with what the scheduler does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koord.scheduler.framework.interface import Code, CycleState, Status
from koord.scheduler.framework.runtime import (
    Framework,
    PluginFailure,
    call,
)
from koord.scheduler.framework.snapshot import NodeSet
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo


@dataclass(slots=True)
class FilterOutcome:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    rejected_by: dict[str, int] = field(default_factory=dict)
    """Plugin name -> how many nodes it rejected in this call."""


def new_state(pod: Obj) -> CycleState:
    return CycleState(PodInfo(pod))


def _nodes(fw: Framework, nodes: Sequence[NodeInfo]) -> NodeSet:
    snapshot = getattr(fw.handle, "snapshot", None)
    return (
        nodes if isinstance(nodes, NodeSet) else NodeSet.of(snapshot() if callable(snapshot) else None, nodes)
    )


def run_filter(
    fw: Framework, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo], names: Sequence[str] | None = None
) -> FilterOutcome:
    """PreFilter (its node subset and rejection included) and Filter over every node given. ``names``,
    the nodes' names in order when the caller holds them (the request's own strings), write the answer:
    thousands of strings just decoded are quicker to read than the snapshot's, spread over the heap."""
    result, rejected = fw.run_pre_filter(state, pod)
    out = FilterOutcome()
    if rejected is not None:
        message = rejected.message or f"rejected by {rejected.plugin}"
        target = out.unresolvable if rejected.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE else out.failed
        for ni in nodes:
            target[ni.name] = message
        out.rejected_by[rejected.plugin] = len(nodes)
        return out
    if result is not None and result.node_names is not None:
        allowed = result.node_names
        why = "node(s) didn't satisfy the PreFilter plugins' node selection"
        for ni in nodes:
            if ni.name not in allowed:
                out.unresolvable[ni.name] = why
        nodes = [ni for ni in nodes if ni.name in allowed]
    found = fw.find_feasible(state, pod, _nodes(fw, nodes))
    # Thousands of nodes, a handful of distinct statuses: each is read once and its nodes are written
    # into the answer at C level.
    grouped, singles = found.groups()
    if names is not None and found.nodes is nodes and len(names) == len(nodes):
        given = np.empty(len(names), dtype=object)
        given[:] = names
        failing = np.zeros(len(names), dtype=bool)
        for _, positions in grouped:
            failing[positions] = True
        failing[[pos for pos, _ in singles]] = True
        out.passed = given[~failing].tolist()

        def names_at(positions: Sequence[int] | np.ndarray) -> list[str]:
            picked: list[str] = given[positions].tolist()
            return picked
    else:
        out.passed = found.feasible.names
        names_at = found.nodes.names_at
    for st, positions in grouped:
        names = names_at(positions)
        target = out.unresolvable if st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE else out.failed
        target.update(dict.fromkeys(names, st.message or f"rejected by {st.plugin}"))
        out.rejected_by[st.plugin] = out.rejected_by.get(st.plugin, 0) + len(names)
    for name, (_, st) in zip(names_at([pos for pos, _ in singles]), singles, strict=True):
        target = out.unresolvable if st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE else out.failed
        target[name] = st.message or f"rejected by {st.plugin}"
        out.rejected_by[st.plugin] = out.rejected_by.get(st.plugin, 0) + 1
    return out


def combine_scores(
    weighted: Sequence[tuple[int, Sequence[int] | np.ndarray]], count: int, total_weight: int | None = None
) -> list[int]:
    """The extender's 0..10 from plugin scores: ``round(sum w_p*s_p / (10 * sum w_p))``, half up.

    ``weighted`` holds each plugin's weight and its 0..100 scores, one per node in order. The weighted
    mean (0..100) is divided by 10 because kube-scheduler multiplies extender scores by ``weight * 10``;
    the extender's own ``weight`` in kube-scheduler's config therefore plays the part of a plugin weight,
    and our plugin weights set proportions among our plugins only. ``total_weight`` (default: the weights
    given) counts every enabled score plugin, so a plugin skipped for the pod counts as a zero score.
    """
    tw = sum(w for w, _ in weighted) if total_weight is None else total_weight
    if tw <= 0 or not weighted:
        return [0] * count
    acc = np.zeros(count, dtype=np.int64)
    for w, scores in weighted:
        acc += w * np.asarray(scores, dtype=np.int64)
    combined: list[int] = ((2 * acc + 10 * tw) // (20 * tw)).tolist()
    return combined


def node_scores(
    fw: Framework, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]
) -> tuple[NodeSet, list[int]]:
    """PreScore, Score and NormalizeScore: the nodes and the extender's combined 0..10 of each, in order."""
    ns = _nodes(fw, nodes)
    fw.run_pre_score(state, pod, ns)
    scores = fw.plugin_scores(state, pod, ns)
    return ns, combine_scores([(e.weight, v) for e, v in scores], len(ns), fw.total_score_weight)


def explain(
    fw: Framework, pod: Obj, nodes: Sequence[NodeInfo], names: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Why the cycle would (not) pick each node of ``names`` for ``pod``, computed by the cycle's own code
    over ``nodes`` (the candidates a cycle would see): PreFilter (a SKIP skips that plugin's filter),
    every Filter plugin's verdict on the node, then PreScore, Score and NormalizeScore over the nodes
    that pass, so the per-plugin scores are the normalised ones and ``extenderScore`` is what
    ``/prioritize`` answers for that node list. Reserves nothing; a failing plugin is reported in
    ``error``."""
    state = new_state(pod)
    out: dict[str, dict[str, Any]] = {n: {"filter": [], "scores": {}, "passes": False} for n in names}
    try:
        result, rejected = fw.run_pre_filter(state, pod)
        by_name = {ni.name: ni for ni in nodes}
        for name in names:
            verdicts = out[name]["filter"]
            info = by_name.get(name) or NodeInfo(name, None)
            for e in fw.points.get("filter", ()):
                if rejected is not None:
                    why = f"PreFilter {rejected.plugin}: {rejected.message or rejected.code.name}"
                    verdicts.append({"plugin": e.name, "filter": why})
                elif e.name in state.skip_filter:
                    verdicts.append({"plugin": e.name, "filter": "skipped (PreFilter)"})
                else:
                    st = call(e.name, "filter", e.plugin.filter, state, pod, info)
                    verdicts.append({"plugin": e.name, "filter": _verdict(st)})
        candidates = list(nodes)
        if result is not None and result.node_names is not None:
            candidates = [ni for ni in candidates if ni.name in result.node_names]
        feasible = (
            []
            if rejected is not None
            else fw.find_feasible(state, pod, _nodes(fw, candidates)).feasible.infos
        )
        for ni in feasible:
            if ni.name in out:
                out[ni.name]["passes"] = True
        if feasible:
            ns = _nodes(fw, feasible)
            fw.run_pre_score(state, pod, ns)
            per_plugin = fw.plugin_scores(state, pod, ns)
            combined = combine_scores([(e.weight, v) for e, v in per_plugin], len(ns), fw.total_score_weight)
            for i, ni in enumerate(feasible):
                if ni.name in out:
                    out[ni.name]["scores"] = {e.name: int(v[i]) for e, v in per_plugin}
                    out[ni.name]["extenderScore"] = combined[i]
    except PluginFailure as err:
        for doc in out.values():
            doc["error"] = str(err)
            doc["passes"] = False
    for name, doc in out.items():
        doc["plugins"] = fw.debug_node(name)
    return out


def _verdict(st: Status | None) -> str:
    if st is None or st.code is Code.SUCCESS:
        return "pass"
    return st.message or st.code.name
