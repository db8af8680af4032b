"""Node facts every process decides on: name, labels, readiness, schedulability, label selection, the
required node affinity of a pod (component-helpers' ``NodeSelector`` semantics) and taints against a pod's
tolerations (``v1helper.TolerationsTolerateTaint``). Pure: objects are the API's JSON as mappings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from koordshared.apis.core.pod import as_list, as_map, condition
from koordshared.apis.meta.selector import LabelSelector

Obj = Mapping[str, Any]

NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def node_name(node: Obj) -> str:
    return str(as_map(node, "metadata").get("name") or "")


def labels_of(obj: Obj) -> Mapping[str, str]:
    labels = as_map(obj, "metadata").get("labels")
    return labels if isinstance(labels, Mapping) else {}


def is_ready(node: Obj) -> bool:
    """Koordinator's ``IsReady``: false only when a ``Ready`` condition says other than ``True``."""
    cond = condition(node, "Ready")
    return cond is None or cond.get("status") == "True"


def is_unschedulable(node: Obj) -> bool:
    return bool(as_map(node, "spec").get("unschedulable"))


def select(nodes: Iterable[Obj], selector: LabelSelector | None) -> list[Obj]:
    """``nodes`` whose labels match ``selector`` (all of them when it is ``None``)."""
    if selector is None:
        return list(nodes)
    return [n for n in nodes if selector.matches(labels_of(n))]


# ---- node affinity (component-helpers' NodeSelector semantics) ---------------------------------------


def requirement_matches(req: Any, labels: Mapping[str, Any]) -> bool:
    if not isinstance(req, Mapping):
        return False
    key, op = req.get("key"), req.get("operator")
    values = req.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    present = key in labels
    if op == "In":
        return present and str(labels[key]) in values
    if op == "NotIn":
        return not present or str(labels[key]) not in values
    if op == "Exists":
        return present and not values
    if op == "DoesNotExist":
        return not present and not values
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(str(labels[key])), int(str(values[0]))
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False  # an unknown operator matches nothing, as a parse error does


def term_matches(term: Any, node: Obj) -> bool:
    """A term ANDs its expressions and fields; a term with neither matches nothing."""
    exprs, fields = as_list(term, "matchExpressions"), as_list(term, "matchFields")
    if not exprs and not fields:
        return False
    labels = labels_of(node)
    if not all(requirement_matches(r, labels) for r in exprs):
        return False
    own_fields = {"metadata.name": node_name(node)}
    for r in fields:
        if (
            not isinstance(r, Mapping)
            or r.get("key") != "metadata.name"
            or r.get("operator") not in ("In", "NotIn")
        ):
            return False
        if not requirement_matches(r, own_fields):
            return False
    return True


def matches_node_selector(pod: Obj, node: Obj) -> bool:
    """``PodMatchNodeSelector``: ``spec.nodeSelector`` and the required node affinity (terms ORed)."""
    spec = as_map(pod, "spec")
    labels = labels_of(node)
    for key, value in as_map(spec, "nodeSelector").items():
        if labels.get(key) != value:
            return False
    required = as_map(
        as_map(as_map(spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    return any(term_matches(t, node) for t in as_list(required, "nodeSelectorTerms"))


# ---- taints ------------------------------------------------------------------------------------------


def tolerates(toleration: Any, taint: Mapping[str, Any]) -> bool:
    if not isinstance(toleration, Mapping):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    op = toleration.get("operator") or "Equal"
    if not key:
        return op == "Exists"  # an empty key with Exists tolerates everything
    if key != taint.get("key"):
        return False
    if op == "Exists":
        return True
    return op == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(pod: Obj, node: Obj, effects: Sequence[str] = NO_SCHEDULE_EFFECTS) -> list[str]:
    """The node's taints with one of ``effects`` that no toleration of the pod tolerates."""
    tolerations = as_list(as_map(pod, "spec"), "tolerations")
    out = []
    for taint in as_list(as_map(node, "spec"), "taints"):
        if not isinstance(taint, Mapping) or taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            out.append(f"{taint.get('key')}={taint.get('value') or ''}:{taint.get('effect')}")
    return out
