"""Koordinator's annotations on the NodeResourceTopology object (the object itself:
:mod:`koordshared.apis.noderesourcetopology`): the node half of the node-scheduler contract
(``docs/node-scheduler-contract.md``). koordlet writes them (``statesinformer/impl/
states_noderesourcetopology.go``); koord-scheduler's NodeNUMAResource reads them.

Shapes are Koordinator's ``apis/extension`` structs (``numa_aware.go``, ``node_reservation.go``,
``system_qos.go``, ``cpu_normalization.go``) and the noderesourcetopology-api v1alpha1 types, written as Go's
``encoding/json`` writes them (see :func:`koordshared.apis.numa.dumps`). Pure: stdlib only; both sides parse
with these functions. A malformed annotation is :class:`InvalidValue`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.cpulist import format_cpuset, parse_cpuset
from koordshared.apis.numa import (
    dumps,
    json_cpus,
    json_int,
    json_list,
    json_object,
    json_string,
    loads_annotation,
)
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
