"""The NodeResourceTopology object (``topology.node.k8s.io/v1alpha1``, cluster-scoped, named after its
node): zones per NUMA node with capacity, allocatable and available resources, the topology policies, and
the annotations of :mod:`koordshared.apis.nrt`.

:class:`NodeTopologyStatus` is what the agent computes; :meth:`NodeTopologyStatus.apply_to` writes it into
an existing object the way koordlet's ``nodeTopologyStatus.updateNRT`` does (its annotations and labels set,
others kept; zones trimmed to the agent's and merged, so a resource another component added to a zone
stays), and :meth:`NodeTopologyStatus.difference` is koordlet's ``isChanged`` (managed annotations compared
as JSON values, zones by name, type and managed resource quantities). Pure: stdlib only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.groups import NODE_RESOURCE_TOPOLOGIES
from koordshared.apis.nrt import LABEL_ENABLE_NUMA_RESERVATION, LABEL_MANAGED_BY, MANAGED_ANNOTATIONS
from koordshared.apis.quantity import parse_quantity
from koordshared.runtime.errors import InvalidValue

ZONE_TYPE_NODE = "Node"
POLICY_NONE = "None"
MANAGED_RESOURCES = ("cpu", "memory", "koordinator.sh/gpu", "hugepages-2Mi", "hugepages-1Gi")
"""Zone resources the agent owns (``managedNRTResources``)."""
MANAGED_LABELS = (LABEL_ENABLE_NUMA_RESERVATION,)

_POLICIES = {
    ("single-numa-node", "container"): "SingleNUMANodeContainerLevel",
    ("restricted", "container"): "RestrictedContainerLevel",
    ("best-effort", "container"): "BestEffortContainerLevel",
    ("single-numa-node", "pod"): "SingleNUMANodePodLevel",
    ("restricted", "pod"): "RestrictedPodLevel",
    ("best-effort", "pod"): "BestEffortPodLevel",
}


def topology_policy(manager_policy: str, scope: str) -> str:
    """The NRT policy of the kubelet's ``topologyManagerPolicy`` and ``topologyManagerScope``
    (koordlet's ``getTopologyPolicy``): ``None`` for ``none``, unknown values and an empty scope."""
    return _POLICIES.get((manager_policy, scope), POLICY_NONE)


def zone_name(numa_node: int) -> str:
    """``node-<id>`` (Koordinator's ``GenNodeZoneName``)."""
    return f"node-{numa_node}"


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One resource of a zone; quantities as the API writes them (``"4"``, ``"8Gi"``)."""

    name: str
    capacity: str
    allocatable: str
    available: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "available": self.available,
        }


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    type: str = ZONE_TYPE_NODE
    resources: tuple[ResourceInfo, ...] = ()

    def resource(self, name: str) -> ResourceInfo | None:
        return next((r for r in self.resources if r.name == name), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.resources:
            out["resources"] = [r.to_json() for r in self.resources]
        return out


def zones_of(obj: Mapping[str, Any]) -> tuple[Zone, ...]:
    """The zones of an NRT object's JSON (``InvalidValue`` when they are not zone objects)."""
    raw = obj.get("zones") or []
    if not isinstance(raw, list):
        raise InvalidValue("zones", raw, "want a list")
    zones = []
    for z in raw:
        if not isinstance(z, Mapping):
            raise InvalidValue("zones", z, "want zone objects")
        res = []
        for r in z.get("resources") or []:
            if not isinstance(r, Mapping):
                raise InvalidValue("zones[].resources", r, "want resource objects")
            res.append(
                ResourceInfo(
                    str(r.get("name", "")),
                    str(r.get("capacity", "0")),
                    str(r.get("allocatable", "0")),
                    str(r.get("available", "0")),
                )
            )
        zones.append(Zone(str(z.get("name", "")), str(z.get("type", "")), tuple(res)))
    return tuple(zones)


def _same_quantity(a: str, b: str) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except InvalidValue:
        return a == b


def _zones_difference(old: Sequence[Zone], new: Sequence[Zone]) -> str:
    if len(old) != len(new):
        return "zones number"
    for i, (o, n) in enumerate(zip(old, new, strict=True)):
        if o.name != n.name or o.type != n.type:
            return f"zone {i} name or type"
        for name in MANAGED_RESOURCES:
            a, b = o.resource(name), n.resource(name)
            if (a is None) != (b is None):
                return f"zone {o.name} resource {name}"
            if a is not None and b is not None:
                for x, y in (
                    (a.capacity, b.capacity),
                    (a.allocatable, b.allocatable),
                    (a.available, b.available),
                ):
                    if not _same_quantity(x, y):
                        return f"zone {o.name} resource {name}"
    return ""


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # compared as text: a malformed value the agent did not write differs from its own


def merge_zones(old: Sequence[Zone], new: Sequence[Zone]) -> tuple[Zone, ...]:
    """Koordinator's ``MergeZoneList(TrimDifferentZone(old, new), new)``: the zones of ``new``; in each,
    ``new``'s resources plus any other resource the old zone of that name had."""
    by_name = {z.name: z for z in old}
    out = []
    for z in new:
        before = by_name.get(z.name)
        names = {r.name for r in z.resources}
        kept = tuple(r for r in (before.resources if before else ()) if r.name not in names)
        out.append(Zone(z.name, z.type, tuple(sorted(z.resources + kept, key=lambda r: r.name))))
    return tuple(sorted(out, key=lambda z: z.name))


@dataclass(frozen=True, slots=True)
class NodeTopologyStatus:
    """What the agent reports for its node."""

    zones: tuple[Zone, ...]
    topology_policy: str = POLICY_NONE
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    def difference(self, obj: Mapping[str, Any] | None) -> str:
        """Why ``obj`` (an NRT object's JSON) does not already say this status; ``""`` when it does."""
        if obj is None:
            return "no object"
        meta = obj.get("metadata") or {}
        old_annotations = meta.get("annotations")
        if not isinstance(old_annotations, Mapping):
            return "metadata changed"
        if obj.get("topologyPolicies") != [self.topology_policy]:
            return "topologyPolicies changed"
        for key in MANAGED_ANNOTATIONS:
            old, new = old_annotations.get(key), self.annotations.get(key)
            if (old is None) != (new is None):
                return f"annotation {key}"
            if old is not None and new is not None and _json_value(old) != _json_value(new):
                return f"annotation {key}"
        old_labels = meta.get("labels") or {}
        for key in MANAGED_LABELS:
            if old_labels.get(key) != self.labels.get(key):
                return f"label {key}"
        try:
            return _zones_difference(zones_of(obj), self.zones)
        except InvalidValue:
            return "zones unreadable"

    def apply_to(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` saying this status (``updateNRT``); other annotations and labels are kept."""
        out = copy.deepcopy(dict(obj))
        meta = out.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        out["topologyPolicies"] = [self.topology_policy]
        try:
            old = zones_of(out)
        except InvalidValue:
            old = ()
        out["zones"] = [z.to_json() for z in merge_zones(old, self.zones)]
        return out


def new_object(node_name: str, node_uid: str) -> dict[str, Any]:
    """A fresh object for ``node_name`` (koordlet's ``newNodeTopo``): managed by Koordinator, owned by the
    Node when its UID is known (deleted with it), policies ``None`` and no zones until a status is applied."""
    meta: dict[str, Any] = {"name": node_name, "labels": {LABEL_MANAGED_BY: "Koordinator"}}
    if node_uid:  # the API refuses an owner reference without a UID
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": NODE_RESOURCE_TOPOLOGIES.api_version,
        "kind": NODE_RESOURCE_TOPOLOGIES.kind,
        "metadata": meta,
        "topologyPolicies": [POLICY_NONE],
        "zones": [],
    }
