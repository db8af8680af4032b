"""``NodeFit`` for descheduler plugins (Koordinator's ``pkg/descheduler/node``: would this pod be
schedulable there?), a subset of kube-scheduler's predicates: the pod's ``nodeSelector`` and required node
affinity, the node's ``NoSchedule``/``NoExecute`` taints against the pod's tolerations, the pod's requests
against the node's allocatable minus what its pods request, and ``spec.unschedulable``. The requests
already on each node are summed once per :class:`NodeFit` (make one per round), and each pod's requests
and node's allocatable parsed once: a plugin asking for 30 000 pods does not re-add every target's pods
each time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

from koord.descheduler.framework.interface import Obj
from koordshared.apis.core.node import is_unschedulable, matches_node_selector, node_name, untolerated_taints
from koordshared.apis.core.pod import as_map, pod_key
from koordshared.apis.core.resources import ResourceList, parse_resource_list, pod_requests_list

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
        return self._memo(self.requests, pod_key(pod), pod, pod_requests_list)

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
