"""The NodeResourceTopology object (``topology.node.k8s.io/v1alpha1``, cluster-scoped, named after its
node) and Koordinator's annotations on it: the node half of the node-scheduler contract
(``docs/node-scheduler-contract.md``). koordlet writes them; koord-scheduler's NodeNUMAResource reads them.

Annotation shapes are Koordinator's ``apis/extension`` structs, written as Go's ``encoding/json`` writes
them; a malformed annotation is :class:`InvalidValue`. :class:`NodeTopologyStatus` is what the agent
computes; :meth:`NodeTopologyStatus.apply_to` writes it into an existing object as koordlet's
``updateNRT`` does, and :meth:`NodeTopologyStatus.difference` is koordlet's ``isChanged``. Pure: stdlib only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.extension.numa import (
    dumps,
    json_cpus,
    json_int,
    json_list,
    json_object,
    json_string,
    loads_annotation,
)
from koordshared.apis.meta.cpulist import format_cpuset, parse_cpuset
from koordshared.apis.meta.groups import NODE_RESOURCE_TOPOLOGIES
from koordshared.apis.meta.quantity import parse_quantity
from koordshared.runtime.errors import InvalidValue

ANNOTATION_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_POD_CPU_ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_ENABLE_NUMA_RESERVATION = "node.koordinator.sh/enable-numa-reservation"

MANAGED_ANNOTATIONS = (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_CPU_SHARED_POOLS,
    ANNOTATION_BE_CPU_SHARED_POOLS,
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_POD_CPU_ALLOCS,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_SYSTEM_QOS_RESOURCE,
)
"""The annotations the agent owns on the object (``managedNRTAnnotationKeys``); others are left alone."""

KUBELET_POLICY_STATIC = "static"
KUBELET_POLICY_NONE = "none"


# ---- cpu-topology ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUDetail:
    """One logical CPU of ``cpu-topology`` (Koordinator's ``extension.CPUInfo``); ``core`` is numbered
    over the whole node (SMT siblings share it), as ``lscpu`` numbers cores."""

    id: int
    core: int
    socket: int
    node: int

    def to_json(self) -> dict[str, int]:
        return {"id": self.id, "core": self.core, "socket": self.socket, "node": self.node}


def cpu_topology_json(cpus: Iterable[CPUDetail]) -> str:
    detail = [c.to_json() for c in sorted(cpus, key=lambda c: c.id)]
    return dumps({"detail": detail} if detail else {})


def cpu_topology(annotations: Mapping[str, str]) -> tuple[CPUDetail, ...]:
    key = ANNOTATION_CPU_TOPOLOGY
    doc = json_object(loads_annotation(annotations, key), key)
    out = []
    for item in json_list(doc.get("detail"), key):
        d = json_object(item, key)
        out.append(
            CPUDetail(
                json_int(d, "id", key),
                json_int(d, "core", key),
                json_int(d, "socket", key),
                json_int(d, "node", key),
            )
        )
    return tuple(sorted(out, key=lambda c: c.id))


# ---- share pools ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUSharedPool:
    """The CPUs of one (socket, NUMA node) that pods without bound CPUs share."""

    socket: int
    node: int
    cpuset: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"socket": self.socket, "node": self.node}
        if self.cpuset:
            out["cpuset"] = self.cpuset
        return out


def share_pools_json(pools: Sequence[CPUSharedPool]) -> str:
    return dumps([p.to_json() for p in pools])


def share_pools(
    annotations: Mapping[str, str], key: str = ANNOTATION_CPU_SHARED_POOLS
) -> tuple[CPUSharedPool, ...]:
    """``cpu-shared-pools`` (or ``be-cpu-shared-pools`` with that ``key``); absent or ``null`` is none."""
    out = []
    for item in json_list(loads_annotation(annotations, key), key):
        d = json_object(item, key)
        out.append(
            CPUSharedPool(json_int(d, "socket", key), json_int(d, "node", key), json_cpus(d, "cpuset", key))
        )
    return tuple(out)


def pools_from_cpus(cpus: Iterable[CPUDetail]) -> tuple[CPUSharedPool, ...]:
    """One pool per NUMA node holding ``cpus``, its socket that of the node's first CPU, sorted by
    (socket, node) (Koordinator's ``covertCPUsToSharePool``)."""
    by_node: dict[int, list[CPUDetail]] = {}
    for c in cpus:
        by_node.setdefault(c.node, []).append(c)
    pools = []
    for node, members in by_node.items():
        members.sort(key=lambda c: c.id)
        pools.append(CPUSharedPool(members[0].socket, node, format_cpuset(c.id for c in members)))
    return tuple(sorted(pools, key=lambda p: (p.socket, p.node)))


def pool_cpus(pools: Iterable[CPUSharedPool]) -> frozenset[int]:
    out: set[int] = set()
    for p in pools:
        out |= parse_cpuset(p.cpuset)
    return frozenset(out)


# ---- kubelet CPU manager, pod allocations ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KubeletCPUManagerPolicy:
    """``kubelet.koordinator.sh/cpu-manager-policy``."""

    policy: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.policy:
            out["policy"] = self.policy
        if self.options:
            out["options"] = dict(self.options)
        if self.reserved_cpus:
            out["reservedCPUs"] = self.reserved_cpus
        return out


def kubelet_cpu_manager_policy(annotations: Mapping[str, str]) -> KubeletCPUManagerPolicy:
    key = ANNOTATION_KUBELET_CPU_MANAGER_POLICY
    doc = json_object(loads_annotation(annotations, key), key)
    options = {str(k): str(v) for k, v in json_object(doc.get("options"), key).items()}
    return KubeletCPUManagerPolicy(
        json_string(doc, "policy", key), options, json_cpus(doc, "reservedCPUs", key)
    )


@dataclass(frozen=True, slots=True)
class PodCPUAlloc:
    """A pod whose CPUs the kubelet's static CPU manager assigned (``pod-cpu-allocs``)."""

    namespace: str = ""
    name: str = ""
    uid: str = ""
    cpuset: str = ""
    managed_by_kubelet: bool = False

    def to_json(self) -> dict[str, Any]:
        pairs = (
            ("namespace", self.namespace),
            ("name", self.name),
            ("uid", self.uid),
            ("cpuset", self.cpuset),
        )
        out: dict[str, Any] = {k: v for k, v in pairs if v}
        if self.managed_by_kubelet:
            out["managedByKubelet"] = True
        return out


def pod_cpu_allocs_json(allocs: Sequence[PodCPUAlloc]) -> str:
    """``null`` when there is none, as Go marshals a nil slice."""
    return dumps([a.to_json() for a in allocs] if allocs else None)


def pod_cpu_allocs(annotations: Mapping[str, str]) -> tuple[PodCPUAlloc, ...]:
    key = ANNOTATION_POD_CPU_ALLOCS
    out = []
    for item in json_list(loads_annotation(annotations, key), key):
        d = json_object(item, key)
        managed = d.get("managedByKubelet", False)
        out.append(
            PodCPUAlloc(
                json_string(d, "namespace", key),
                json_string(d, "name", key),
                json_string(d, "uid", key),
                json_cpus(d, "cpuset", key),
                managed is True,
            )
        )
    return tuple(out)


# ---- node-level reservations ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SystemQOSResource:
    """``node.koordinator.sh/system-qos-resource``: CPUs for SYSTEM QoS pods, exclusive unless said not."""

    cpuset: str = ""
    cpuset_exclusive: bool | None = None

    @property
    def exclusive_cpus(self) -> frozenset[int]:
        """CPUs no other pod may use (``IsCPUSetExclusive``: exclusive when the field is absent)."""
        if not self.cpuset or self.cpuset_exclusive is False:
            return frozenset()
        return parse_cpuset(self.cpuset)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cpuset:
            out["cpuset"] = self.cpuset
        if self.cpuset_exclusive is not None:
            out["cpusetExclusive"] = self.cpuset_exclusive
        return out


def system_qos_resource(annotations: Mapping[str, str]) -> SystemQOSResource:
    key = ANNOTATION_SYSTEM_QOS_RESOURCE
    doc = json_object(loads_annotation(annotations, key), key)
    exclusive = doc.get("cpusetExclusive")
    if exclusive is not None and not isinstance(exclusive, bool):
        raise InvalidValue(key, exclusive, "cpusetExclusive must be a boolean")
    return SystemQOSResource(json_cpus(doc, "cpuset", key), exclusive)


@dataclass(frozen=True, slots=True)
class NodeReservation:
    """``node.koordinator.sh/reservation``: resources and CPUs kept from every pod."""

    resources: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: str = ""
    apply_policy: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.resources:
            out["resources"] = dict(self.resources)
        if self.reserved_cpus:
            out["reservedCPUs"] = self.reserved_cpus
        if self.apply_policy:
            out["applyPolicy"] = self.apply_policy
        return out


def node_reservation(annotations: Mapping[str, str]) -> NodeReservation:
    key = ANNOTATION_NODE_RESERVATION
    if not annotations.get(key):
        return NodeReservation()
    doc = json_object(loads_annotation(annotations, key), key)
    resources = {str(k): str(v) for k, v in json_object(doc.get("resources"), key).items()}
    return NodeReservation(
        resources, json_cpus(doc, "reservedCPUs", key), json_string(doc, "applyPolicy", key)
    )


@dataclass(frozen=True, slots=True)
class CPUBasicInfo:
    """``node.koordinator.sh/cpu-basic-info``."""

    cpu_model: str = ""
    hyper_thread_enabled: bool = False
    turbo_enabled: bool = False
    cat_l3_cbm_mask: str = ""
    vendor_id: str = ""

    def to_json(self) -> dict[str, Any]:
        pairs: tuple[tuple[str, Any], ...] = (
            ("cpuModel", self.cpu_model),
            ("hyperThreadEnabled", self.hyper_thread_enabled),
            ("turboEnabled", self.turbo_enabled),
            ("catL3CbmMask", self.cat_l3_cbm_mask),
            ("vendorID", self.vendor_id),
        )
        return {k: v for k, v in pairs if v}


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
