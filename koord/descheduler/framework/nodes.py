"""Node predicates for descheduler plugins: readiness, label selection and ``NodeFit`` (Koordinator's
``pkg/descheduler/node``: would this pod be schedulable there?).

:class:`NodeFit` checks, as the descheduler does (a subset of kube-scheduler's predicates): the pod's
``nodeSelector`` and required node affinity, the node's ``NoSchedule``/``NoExecute`` taints against the
pod's tolerations, the pod's requests against the node's allocatable minus what its pods request, and
``spec.unschedulable``. The requests already on each node are summed once per :class:`NodeFit` (make one
per round), and each pod's requests and node's allocatable parsed once: a plugin asking for 30 000 pods
does not re-add every target's pods each time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from koord.apis.pod import as_list, as_map
from koord.apis.resources import ResourceList, parse_resource_list, pod_requests_list
from koord.apis.selector import LabelSelector
from koord.descheduler.framework.interface import Obj

NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def node_name(node: Obj) -> str:
    return str(as_map(node, "metadata").get("name") or "")


def labels_of(obj: Obj) -> Mapping[str, str]:
    labels = as_map(obj, "metadata").get("labels")
    return labels if isinstance(labels, Mapping) else {}


def is_ready(node: Obj) -> bool:
    """Koordinator's ``IsReady``: false only when a ``Ready`` condition says other than ``True``."""
    for cond in as_list(as_map(node, "status"), "conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready" and cond.get("status") != "True":
            return False
    return True


def is_unschedulable(node: Obj) -> bool:
    return bool(as_map(node, "spec").get("unschedulable"))


def select(nodes: Iterable[Obj], selector: LabelSelector | None) -> list[Obj]:
    """``nodes`` whose labels match ``selector`` (all of them when it is ``None``)."""
    if selector is None:
        return list(nodes)
    return [n for n in nodes if selector.matches(labels_of(n))]


# ---- node affinity (component-helpers' NodeSelector semantics) ---------------------------------------


def _requirement_matches(req: Any, labels: Mapping[str, Any]) -> bool:
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


def _term_matches(term: Any, node: Obj) -> bool:
    """A term ANDs its expressions and fields; a term with neither matches nothing."""
    exprs, fields = as_list(term, "matchExpressions"), as_list(term, "matchFields")
    if not exprs and not fields:
        return False
    labels = labels_of(node)
    if not all(_requirement_matches(r, labels) for r in exprs):
        return False
    own_fields = {"metadata.name": node_name(node)}
    for r in fields:
        if (
            not isinstance(r, Mapping)
            or r.get("key") != "metadata.name"
            or r.get("operator") not in ("In", "NotIn")
        ):
            return False
        if not _requirement_matches(r, own_fields):
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
    return any(_term_matches(t, node) for t in as_list(required, "nodeSelectorTerms"))


# ---- taints ------------------------------------------------------------------------------------------


def _tolerates(toleration: Any, taint: Mapping[str, Any]) -> bool:
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
        if not any(_tolerates(t, taint) for t in tolerations):
            out.append(f"{taint.get('key')}={taint.get('value') or ''}:{taint.get('effect')}")
    return out


# ---- requests ----------------------------------------------------------------------------------------


Milli = dict[str, int]
ParsedMemo = dict[str, tuple[Obj, Milli]]


def _milli(q: Fraction) -> int:
    return math.ceil(q * 1000)


class NodeFit:
    """Koordinator's ``NodeFit`` with the requests on each node summed once (see the module docstring).
    ``pods_on_node`` lists the non-terminated pods bound to a node."""

    def __init__(
        self, pods_on_node: Callable[[str], Sequence[Obj]], requests: ParsedMemo | None = None
    ) -> None:
        self._pods_on_node = pods_on_node
        self._requested: dict[str, Milli] = {}
        self.requests: ParsedMemo = requests if requests is not None else {}
        """Each pod's requests by ``namespace/name``; a plugin may keep it across rounds (and prune it)."""
        self._allocatable: ParsedMemo = {}

    @staticmethod
    def _memo(memo: ParsedMemo, key: str, obj: Obj, parse: Callable[[Obj], ResourceList]) -> Milli:
        # cached objects are replaced when they change, never changed: identity tells a hit
        hit = memo.get(key)
        if hit is None or hit[0] is not obj:
            hit = memo[key] = (obj, {r: _milli(q) for r, q in parse(obj).items()})
        return hit[1]

    def pod_requests(self, pod: Obj) -> Milli:
        """The pod's requests in milli-units, as ``Quantity.MilliValue()`` rounds them."""
        m = pod.get("metadata") or {}
        return self._memo(
            self.requests, f"{m.get('namespace') or ''}/{m.get('name') or ''}", pod, pod_requests_list
        )

    def allocatable(self, node: Obj) -> Milli:
        return self._memo(
            self._allocatable,
            node_name(node),
            node,
            lambda n: parse_resource_list(as_map(as_map(n, "status"), "allocatable")),
        )

    def requested(self, node: Obj) -> Milli:
        name = node_name(node)
        total = self._requested.get(name)
        if total is None:
            pods = self._pods_on_node(name)
            total = {"pods": 1000 * len(pods)}
            for p in pods:
                for res, q in self.pod_requests(p).items():
                    total[res] = total.get(res, 0) + q
            self._requested[name] = total
        return total

    def insufficient(self, pod: Obj, node: Obj) -> list[str]:
        """Resources the pod requests beyond what the node has left (Koordinator's ``fitsRequest``)."""
        allocatable = self.allocatable(node)
        used = self.requested(node)
        out = []
        for res, want in self.pod_requests(pod).items():
            # In milli-units rounded up, as Quantity.MilliValue() compares them.
            left = allocatable.get(res)
            if left is None or want > left - used.get(res, 0):
                out.append(f"insufficient {res}")
        return out

    def reasons(self, pod: Obj, node: Obj) -> list[str]:
        """Why ``pod`` would not fit ``node`` (empty: it fits)."""
        out = []
        if not matches_node_selector(pod, node):
            out.append("pod node selector does not match the node label")
        if untolerated_taints(pod, node):
            out.append("pod does not tolerate taints on the node")
        out += self.insufficient(pod, node)
        if is_unschedulable(node):
            out.append("node is not schedulable")
        return out

    def fits(self, pod: Obj, node: Obj) -> bool:
        return not self.reasons(pod, node)

    def fits_any_other(self, pod: Obj, nodes: Iterable[Obj]) -> bool:
        """``PodFitsAnyOtherNode``: some node other than the pod's own would take it."""
        own = as_map(pod, "spec").get("nodeName")
        return any(node_name(n) != own and self.fits(pod, n) for n in nodes)
