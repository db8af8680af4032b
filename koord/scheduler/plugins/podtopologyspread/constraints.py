"""A pod's topology spread constraints as PodTopologySpread evaluates them (kube-scheduler's
``podtopologyspread/common.go``): the pod's own ``topologySpreadConstraints`` of one action, else the
default constraints with a selector derived from the pod's controller (see the package docstring);
which pods a constraint counts, and on which nodes (``nodeAffinityPolicy``, ``nodeTaintsPolicy``).

Per-node facts are snapshot columns, recomputed only for nodes that changed: how many pods of the
pod's namespace a selector matches on each node (terminating pods left out, as kube-scheduler does),
whether a node matches the pod's required node affinity, whether it has a taint the pod does not
tolerate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from koord.scheduler.framework import NodeInfo, Obj, Snapshot
from koord.scheduler.framework.snapshot import per_domain
from koord.scheduler.plugins.podtopologyspread.args import HONOR, IGNORE, NAME_PREFIX
from koordshared.apis.core.node import labels_of, matches_node_selector, untolerated_taints
from koordshared.apis.core.pod import as_list, as_map, controller_ref
from koordshared.apis.meta.selector import NOTHING, LabelSelector, Requirement, parse_selector

DEFAULT_OWNER_KINDS = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
"""The controllers whose pods get the default constraints (kube-scheduler derives the selector from
Services, ReplicationControllers, ReplicaSets and StatefulSets selecting the pod)."""


@dataclass(frozen=True, slots=True)
class PodSelector:
    """The pods a constraint counts: those a label selector matches or, for a default constraint, those
    of the same controller (``owner``: its uid)."""

    labels: LabelSelector = NOTHING
    owner: str = ""

    def matches(self, pod: Obj) -> bool:
        if self.owner:
            ref = controller_ref(pod)
            return ref is not None and str(ref.get("uid") or "") == self.owner
        return self.labels.matches(labels_of(pod))


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: PodSelector
    min_domains: int = 1
    honor_affinity: bool = True
    """``nodeAffinityPolicy: Honor`` (the default): only nodes matching the pod's node affinity count."""
    honor_taints: bool = False
    """``nodeTaintsPolicy: Honor``: nodes with a taint the pod does not tolerate do not count."""


def _merge_match_label_keys(
    selector: LabelSelector, keys: Sequence[str], labels: Mapping[str, str]
) -> LabelSelector:
    """``matchLabelKeys``: the pod's values of those keys ANDed with the selector; an absent selector
    becomes just those labels, as kube-scheduler's ``mergeLabelSetWithSelector`` does."""
    extra = tuple(Requirement(k, "In", frozenset((labels[k],))) for k in keys if k in labels)
    if not extra:
        return selector
    return LabelSelector(extra + (() if selector.nothing else selector.requirements))


def _constraint(raw: Mapping[str, Any], labels: Mapping[str, str]) -> Constraint:
    selector = parse_selector(raw.get("labelSelector"))
    if selector.error:
        raise ValueError(f"labelSelector: {selector.error}")
    keys = [k for k in raw.get("matchLabelKeys") or () if isinstance(k, str)]
    min_domains = raw.get("minDomains")
    return Constraint(
        max_skew=int(raw.get("maxSkew") or 0),
        topology_key=str(raw.get("topologyKey") or ""),
        selector=PodSelector(_merge_match_label_keys(selector, keys, labels)),
        min_domains=max(min_domains, 1) if isinstance(min_domains, int) else 1,
        honor_affinity=raw.get("nodeAffinityPolicy") != IGNORE,
        honor_taints=raw.get("nodeTaintsPolicy") == HONOR,
    )


def default_owner(pod: Obj) -> str:
    """The uid of the pod's controller when it is one whose pods get default constraints, else ""."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") not in DEFAULT_OWNER_KINDS:
        return ""
    return str(ref.get("uid") or "")


def constraints_of(pod: Obj, action: str, defaults: Sequence[Mapping[str, Any]]) -> tuple[Constraint, ...]:
    """The pod's constraints with ``whenUnsatisfiable: action``; a pod without any gets the defaults of
    that action, counting the pods of its controller (none when it has no such controller)."""
    labels = labels_of(pod)
    own = [c for c in as_list(as_map(pod, "spec"), "topologySpreadConstraints") if isinstance(c, Mapping)]
    if own:
        return tuple(_constraint(c, labels) for c in own if c.get("whenUnsatisfiable") == action)
    chosen = [c for c in defaults if c.get("whenUnsatisfiable") == action]
    owner = default_owner(pod) if chosen else ""
    if not owner:
        return ()
    return tuple(replace(_constraint(c, labels), selector=PodSelector(owner=owner)) for c in chosen)


def count_on(ni: NodeInfo, namespace: str, selector: PodSelector) -> int:
    """The pods of ``namespace`` on the node the selector matches, terminating ones left out."""
    return sum(
        1
        for p in ni.pods.values()
        if p.namespace == namespace and not p.is_terminating and selector.matches(p.pod)
    )


def matching_pods(snap: Snapshot, namespace: str, selector: PodSelector) -> np.ndarray:
    """:func:`count_on` per row."""
    return snap.derived(
        (NAME_PREFIX + "count", namespace, selector),
        lambda ni: count_on(ni, namespace, selector),
        np.int64,
        transient=True,
    )


def domains_of(
    snap: Snapshot, namespace: str, selector: PodSelector, key: str, domains: np.ndarray | None, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Matching pods per domain (over ``size`` codes at least) and which domains have a node, counting the
    nodes of ``domains`` (a code per row, -1: left out); ``None``: every node with the key, as the
    snapshot's incrementally kept sums (the common case: no inclusion policy leaves a node out)."""
    counts = matching_pods(snap, namespace, selector)
    if domains is None:
        ones = snap.derived(NAME_PREFIX + "one", lambda ni: 1, np.int64)
        sums = snap.domain_sums((NAME_PREFIX + "count", namespace, selector), counts, key)
        return sums, snap.domain_sums(NAME_PREFIX + "one", ones, key) > 0
    present = np.zeros(size, dtype=bool)
    present[domains[domains >= 0]] = True
    return per_domain(domains, counts, size), present


def has_node_affinity(pod: Obj) -> bool:
    spec = as_map(pod, "spec")
    required = as_map(
        as_map(as_map(spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return bool(as_map(spec, "nodeSelector") or required)


def included(snap: Snapshot, pod: Obj, c: Constraint) -> np.ndarray | None:
    """Per row: whether the node counts for ``c`` under its node inclusion policies (``None``: all)."""
    spec = as_map(pod, "spec")
    mask: np.ndarray | None = None
    if c.honor_affinity and has_node_affinity(pod):
        affinity = as_map(as_map(spec, "affinity"), "nodeAffinity").get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        key = json.dumps([spec.get("nodeSelector"), affinity], sort_keys=True)
        mask = snap.derived(
            (NAME_PREFIX + "affinity", key),
            lambda ni: matches_node_selector(pod, ni.node or {}),
            bool,
            transient=True,
        )
    if c.honor_taints:
        key = json.dumps(spec.get("tolerations") or [], sort_keys=True)
        tolerated = snap.derived(
            (NAME_PREFIX + "taints", key),
            lambda ni: not untolerated_taints(pod, ni.node or {}),
            bool,
            transient=True,
        )
        mask = tolerated if mask is None else mask & tolerated
    return mask


def node_included(pod: Obj, node: Obj, c: Constraint) -> bool:
    """:func:`included` for one node (preemption's what-ifs)."""
    if c.honor_affinity and not matches_node_selector(pod, node):
        return False
    return not (c.honor_taints and untolerated_taints(pod, node))
