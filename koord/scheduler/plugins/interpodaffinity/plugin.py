"""The InterPodAffinity plugin: PreFilter/Filter (required terms of the pod and existing pods' required
anti-affinity), PreScore/Score/NormalizeScore (preferred terms, ``hardPodAffinityWeight``), AddPod/
RemovePod for preemption, and the cluster events that may make a pod it rejected schedulable, with
kube-scheduler's queueing hints.

Args (``InterPodAffinityArgs``): ``hardPodAffinityWeight`` (0..100, default 1) and
``ignorePreferredTermsOfExistingPods`` (default false). Namespaces are watched (``namespaces`` cache)
for ``namespaceSelector``; a front end that cannot watch them treats every namespace as unlabelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from koord.scheduler.framework import (
    QUEUE,
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    Obj,
    PodInfo,
    QueueingHint,
    Status,
    Store,
)
from koord.scheduler.framework.events import NODE, POD
from koord.scheduler.framework.events import SKIP as QUEUE_SKIP
from koord.scheduler.framework.prepared import Prepared
from koord.scheduler.framework.snapshot import snapshot_of
from koord.scheduler.plugins.interpodaffinity.existing import ExistingTerms
from koord.scheduler.plugins.interpodaffinity.filtering import AffinityState
from koord.scheduler.plugins.interpodaffinity.scoring import ScoreState
from koord.scheduler.plugins.interpodaffinity.terms import (
    NAME,
    NAME_PREFIX,
    PodTerms,
    matches_all,
    parse_terms,
    terms_of,
)
from koordshared.apis.core.node import labels_of
from koordshared.apis.core.pod import as_map
from koordshared.apis.meta import groups
from koordshared.apis.meta.selector import LabelSelector
from koordshared.apis.meta.strictargs import InvalidArgs, decode

PRE_FILTER_KEY = NAME_PREFIX + "PreFilter"
PRE_SCORE_KEY = NAME_PREFIX + "PreScore"
NAMESPACES = "namespaces"


class InterPodAffinity(Prepared):
    """Filter, Score and the what-ifs come from :class:`Prepared`, over the states of PreFilter
    (:class:`AffinityState`) and PreScore (:class:`ScoreState`)."""

    name = NAME
    pre_filter_key = PRE_FILTER_KEY
    pre_score_key = PRE_SCORE_KEY

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        fields = decode(args, {"hardPodAffinityWeight": "int", "ignorePreferredTermsOfExistingPods": "bool"})
        self.hard_weight: int = fields.get("hardPodAffinityWeight", 1)
        if not 0 <= self.hard_weight <= 100:
            raise InvalidArgs(
                f"hardPodAffinityWeight: Invalid value: {self.hard_weight}: not in valid range [0, 100]"
            )
        self.ignore_existing_preferred: bool = fields.get("ignorePreferredTermsOfExistingPods", False)
        self.handle = handle
        watch = getattr(handle, "watch", None)
        self.namespaces: Store | None = watch(NAMESPACES, groups.NAMESPACES) if callable(watch) else None
        self.known = ExistingTerms()

    # ---- the pod being scheduled --------------------------------------------------------------------

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self.namespaces.get(namespace) if self.namespaces is not None else None
        return labels_of(ns) if ns is not None else {}

    def _selected(self, selector: LabelSelector) -> Iterable[str]:
        if self.namespaces is None:
            return ()
        return [
            str(as_map(ns, "metadata").get("name") or "")
            for ns in self.namespaces.objects()
            if selector.matches(labels_of(ns))
        ]

    def _incoming(self, state: CycleState, pod: Obj) -> tuple[PodTerms, Mapping[str, str]]:
        info = state.pod_info if state.pod_info is not None and state.pod_info.pod is pod else PodInfo(pod)
        terms = terms_of(info)
        namespace = str(as_map(pod, "metadata").get("namespace") or "")
        return terms.resolved(self._selected) if not terms.empty else terms, self._namespace_labels(namespace)

    # ---- PreFilter / Filter -----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        terms, ns_labels = self._incoming(state, pod)
        if terms.error:
            return Status.unresolvable(f"parsing pod: {terms.error}")
        snap = snapshot_of(self.handle)
        self.known.refresh(snap)
        s = AffinityState.build(snap, pod, terms, ns_labels, self.known)
        if s.skippable:
            return SKIP
        state.write(PRE_FILTER_KEY, s)
        return None

    # ---- PreScore / Score -------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        terms, ns_labels = self._incoming(state, pod)
        own_preferences = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.ignore_existing_preferred and not own_preferences:
            return SKIP
        snap = snapshot_of(self.handle)
        self.known.refresh(snap)
        s = ScoreState.build(snap, pod, terms, ns_labels, self.known, self.hard_weight)
        if s is None:
            return SKIP
        state.write(PRE_SCORE_KEY, s)
        return None

    # ---- queueing hints ---------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        pod_actions = Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE
        node_actions = Action.ADD | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT
        return (
            ClusterEventWithHint(ClusterEvent(POD, pod_actions), self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(NODE, node_actions), self._after_node_change),
        )

    @staticmethod
    def _after_pod_change(pod: Obj, old: Obj | None, new: Obj | None) -> QueueingHint:
        if any(p is not None and not as_map(p, "spec").get("nodeName") for p in (old, new)):
            return QUEUE_SKIP
        terms = parse_terms(pod)
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if old is not None and new is not None:
            if not matches_all(affinity, old) and matches_all(affinity, new):
                return QUEUE
            return QUEUE if matches_all(anti, old) and not matches_all(anti, new) else QUEUE_SKIP
        if new is not None:
            return QUEUE if matches_all(affinity, new) else QUEUE_SKIP
        return QUEUE if old is not None and matches_all(anti, old) else QUEUE_SKIP

    @staticmethod
    def _after_node_change(pod: Obj, old: Obj | None, new: Obj | None) -> QueueingHint:
        terms = parse_terms(pod)
        labels = labels_of(new) if new is not None else {}
        keys = {t.topology_key for t in (*terms.required_affinity, *terms.required_anti_affinity)}
        return QUEUE if any(k in labels for k in keys) else QUEUE_SKIP
