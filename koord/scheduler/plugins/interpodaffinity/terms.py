"""Pod (anti-)affinity terms as InterPodAffinity evaluates them (kube-scheduler's ``framework.AffinityTerm``
and the terms its ``PodInfo`` parses once per pod object). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from koord.scheduler.framework import Obj, PodInfo
from koordshared.apis.core.node import labels_of
from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.meta.selector import NOTHING, LabelSelector, Requirement, parse_selector

NAME = "InterPodAffinity"
NAME_PREFIX = NAME + "/"
EVERYTHING = LabelSelector()
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    selector: LabelSelector
    topology_key: str
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Terms key snapshot columns: hashed once, not on every lookup.
        object.__setattr__(
            self, "_hash", hash((self.namespaces, self.namespace_selector, self.selector, self.topology_key))
        )

    def __hash__(self) -> int:
        return self._hash

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None
    ) -> bool:
        """Whether a pod of ``namespace`` with ``labels`` matches (``namespace_labels``: its namespace's
        labels, ``None`` read as none)."""
        if namespace in self.namespaces or self.namespace_selector.matches(namespace_labels or {}):
            return self.selector.matches(labels)
        return False

    def matches_pod(self, pod: Obj, namespace_labels: Mapping[str, str] | None = None) -> bool:
        return self.matches(
            str(as_map(pod, "metadata").get("namespace") or ""), labels_of(pod), namespace_labels
        )


@dataclass(frozen=True, slots=True)
class PodTerms:
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    preferred_anti_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    error: str = ""
    """Why a term could not be parsed (a malformed selector); such a term matches nothing."""

    @property
    def empty(self) -> bool:
        return not (
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )

    def resolved(self, namespaces_selected: Callable[[LabelSelector], Iterable[str]]) -> PodTerms:
        """The terms of the pod being scheduled, each ``namespaceSelector`` turned into the namespaces
        it selects (an empty selector stays: it selects every namespace, present or future)."""

        def one(t: AffinityTerm) -> AffinityTerm:
            if t.namespace_selector.nothing or t.namespace_selector == EVERYTHING:
                return t
            chosen = frozenset(namespaces_selected(t.namespace_selector))
            return replace(t, namespaces=t.namespaces | chosen, namespace_selector=NOTHING)

        return PodTerms(
            tuple(one(t) for t in self.required_affinity),
            tuple(one(t) for t in self.required_anti_affinity),
            tuple((w, one(t)) for w, t in self.preferred_affinity),
            tuple((w, one(t)) for w, t in self.preferred_anti_affinity),
            self.error,
        )


def matches_all(terms: Sequence[AffinityTerm], pod: Obj) -> bool:
    """kube-scheduler's ``podMatchesAllAffinityTerms``: false without terms."""
    return bool(terms) and all(t.matches_pod(pod) for t in terms)


def _with_label_keys(
    selector: LabelSelector, raw: Mapping[str, Any], labels: Mapping[str, str]
) -> LabelSelector:
    extra = [
        Requirement(k, op, frozenset((labels[k],)))
        for field, op in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
        for k in raw.get(field) or ()
        if isinstance(k, str) and k in labels
    ]
    return LabelSelector(selector.requirements + tuple(extra)) if extra else selector


def _term(raw: Any, namespace: str, labels: Mapping[str, str], errors: list[str]) -> AffinityTerm:
    raw = raw if isinstance(raw, Mapping) else {}
    selector = parse_selector(raw.get("labelSelector"))
    ns_selector = parse_selector(raw.get("namespaceSelector"))
    errors.extend(e for e in (selector.error, ns_selector.error) if e)
    if raw.get("labelSelector") is not None and not selector.error:
        selector = _with_label_keys(selector, raw, labels)
    listed = frozenset(str(n) for n in raw.get("namespaces") or ())
    if not listed and raw.get("namespaceSelector") is None:
        listed = frozenset((namespace,))
    return AffinityTerm(listed, ns_selector, selector, str(raw.get("topologyKey") or ""))


def parse_terms(pod: Obj) -> PodTerms:
    affinity = as_map(as_map(pod, "spec"), "affinity")
    if not (affinity.get("podAffinity") or affinity.get("podAntiAffinity")):
        return PodTerms()
    namespace = str(as_map(pod, "metadata").get("namespace") or "")
    labels = labels_of(pod)
    errors: list[str] = []

    def required(kind: str) -> tuple[AffinityTerm, ...]:
        return tuple(_term(t, namespace, labels, errors) for t in as_list(as_map(affinity, kind), REQUIRED))

    def preferred(kind: str) -> tuple[tuple[int, AffinityTerm], ...]:
        out = []
        for w in as_list(as_map(affinity, kind), PREFERRED):
            if isinstance(w, Mapping):
                out.append(
                    (int(w.get("weight") or 0), _term(w.get("podAffinityTerm"), namespace, labels, errors))
                )
        return tuple(out)

    return PodTerms(
        required("podAffinity"),
        required("podAntiAffinity"),
        preferred("podAffinity"),
        preferred("podAntiAffinity"),
        "; ".join(errors),
    )


def terms_of(info: PodInfo) -> PodTerms:
    """The pod's terms, parsed once per pod object."""
    terms: PodTerms | None = info.memo.get(NAME_PREFIX + "terms")
    if terms is None:
        terms = info.memo[NAME_PREFIX + "terms"] = parse_terms(info.pod)
    return terms
