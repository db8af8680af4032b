"""NodeAffinity (PreFilter, Filter, PreScore, Score; kube-scheduler's ``nodeaffinity``): ``nodeSelector``
and the required node affinity keep a pod off nodes whose labels do not match; ``addedAffinity`` (args)
applies to every pod; preferred terms add their weights on the nodes they match (normalised to 0..100).
A required affinity naming nodes (``matchFields`` ``metadata.name In``) narrows the search in PreFilter.

Batch form: label requirements with ``In``/``NotIn``/``Exists``/``DoesNotExist`` are evaluated as array
comparisons over per-label columns (read once per node change); ``Gt``/``Lt`` node by node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koord.scheduler.framework import (
    SKIP,
    Action,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    PreFilterResult,
    Status,
)
from koord.scheduler.framework.events import NODE
from koordshared.apis.core.node import requirement_matches, term_matches
from koordshared.runtime.errors import InvalidArgs

NAME = "NodeAffinity"
__all__ = ["NAME", "NodeAffinity"]  # the built-in table loads the plugin by these names
ERR_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_CONFLICT = "pod affinity terms conflict"
_KEY = "NodeAffinity/required"
_PREFERRED = "NodeAffinity/preferred"


def _required(affinity: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    req = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(req, Mapping):
        return None
    return [t for t in req.get("nodeSelectorTerms") or () if isinstance(t, Mapping)]


def _preferred(affinity: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    out = []
    for p in (affinity.get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or ():
        if isinstance(p, Mapping) and isinstance(p.get("preference"), Mapping):
            out.append((int(p.get("weight") or 0), p["preference"]))
    return out


class _Selector:
    """``nodeSelector`` ANDed with required terms (ORed), as kube's ``RequiredNodeAffinity``."""

    def __init__(self, labels: Mapping[str, str], terms: list[Mapping[str, Any]] | None) -> None:
        self.labels = dict(labels)
        self.terms = terms

    def matches(self, ni: NodeInfo) -> bool:
        node_labels = ni.labels
        if any(node_labels.get(k) != v for k, v in self.labels.items()):
            return False
        return self.terms is None or any(term_matches(t, ni.node or {}) for t in self.terms)

    def mask(self, nodes: NodeSet) -> np.ndarray:
        if nodes.rows is None:
            return nodes.mask(self.matches)
        ok = np.ones(len(nodes), dtype=bool)
        for key, value in self.labels.items():
            ok &= _label(nodes, key) == value
        if self.terms is not None:
            ok &= np.logical_or.reduce([_term(nodes, t) for t in self.terms] or [np.zeros(len(nodes), bool)])
        return ok


def _label(nodes: NodeSet, key: str) -> np.ndarray:
    col = nodes.column(f"label/{key}", lambda ni: ni.labels.get(key))
    assert col is not None
    return col


def _term(nodes: NodeSet, term: Mapping[str, Any]) -> np.ndarray:
    """One node selector term over the nodes (its expressions and fields ANDed; an empty term matches
    nothing, as in Kubernetes)."""
    exprs = [r for r in term.get("matchExpressions") or () if isinstance(r, Mapping)]
    fields = [r for r in term.get("matchFields") or () if isinstance(r, Mapping)]
    if not exprs and not fields:
        return np.zeros(len(nodes), dtype=bool)
    ok = np.ones(len(nodes), dtype=bool)
    for r in exprs:
        key, op, values = r.get("key"), r.get("operator"), r.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list):
            return np.zeros(len(nodes), dtype=bool)
        col = _label(nodes, key)
        present = col != None  # noqa: E711 - an elementwise comparison on an object array
        if op == "In":
            ok &= present & np.isin(col, [str(v) for v in values])
        elif op == "NotIn":
            ok &= ~present | ~np.isin(col, [str(v) for v in values])
        elif op == "Exists" and not values:
            ok &= present
        elif op == "DoesNotExist" and not values:
            ok &= ~present
        else:  # Gt, Lt, or malformed: node by node, as the helpers decide
            ok &= nodes.mask(lambda ni, r=r: requirement_matches(r, ni.labels))  # type: ignore[misc]
    if fields:
        ok &= nodes.mask(lambda ni: term_matches({"matchFields": fields}, ni.node or {}))
    return ok


class NodeAffinity:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        args = dict(args or {})
        added = args.pop("addedAffinity", None) or {}
        if args:
            raise InvalidArgs(f"unknown field(s) {', '.join(sorted(args))}")
        if not isinstance(added, Mapping):
            raise InvalidArgs("addedAffinity: want a NodeAffinity object")
        unknown = sorted(
            set(added)
            - {
                "requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
            }
        )
        if unknown:
            raise InvalidArgs(f"addedAffinity: unknown field(s) {', '.join(unknown)}")
        wrapped = {"nodeAffinity": added}
        req = _required(wrapped)
        self.added = _Selector({}, req) if req is not None else None
        self.added_preferred = _preferred(wrapped)

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | PreFilterResult | None:
        spec = pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        terms = _required(affinity)
        selector = spec.get("nodeSelector") or {}
        if terms is None and self.added is None and not selector:
            return SKIP
        state.write(_KEY, _Selector(selector, terms))
        if terms is None:
            return None
        names: set[str] | None = None
        for t in terms:
            term_names: set[str] | None = None
            for r in t.get("matchFields") or ():
                if r.get("key") == "metadata.name" and r.get("operator") == "In":
                    s = {str(v) for v in r.get("values") or ()}
                    term_names = s if term_names is None else term_names & s
            if term_names is None:
                return None  # this term allows every node (terms are ORed)
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return Status.unresolvable(ERR_CONFLICT)
        return PreFilterResult(frozenset(names)) if names else None

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        if self.added is not None and not self.added.matches(node_info):
            return Status.unresolvable(ERR_ENFORCED)
        selector = state.get(_KEY)
        if selector is not None and not selector.matches(node_info):
            return Status.unresolvable(ERR_POD)
        return None

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        ok = np.ones(len(nodes), dtype=bool)
        if self.added is not None:
            ok &= self.added.mask(nodes)
        selector = state.get(_KEY)
        if selector is not None:
            ok &= selector.mask(nodes)
        return ok

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> Status | None:
        terms = _preferred((pod.get("spec") or {}).get("affinity") or {}) + self.added_preferred
        if not terms:
            return SKIP
        state.write(_PREFERRED, terms)
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> int:
        return sum(w for w, t in state.get(_PREFERRED) or () if term_matches(t, node_info.node or {}))

    def score_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=np.int64)
        for weight, term in state.get(_PREFERRED) or ():
            matched = (
                _term(nodes, term)
                if nodes.rows is not None
                else nodes.mask(
                    lambda ni, t=term: term_matches(t, ni.node or {})  # type: ignore[misc]
                )
            )
            out += weight * matched
        return out

    def normalize_scores(self, state: CycleState, pod: Obj, scores: np.ndarray) -> np.ndarray:
        top = int(scores.max()) if len(scores) else 0
        return scores * 100 // top if top > 0 else scores

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL)),)
