"""What a node's NodeResourceTopology tells NodeNUMAResource (Koordinator's ``topology_options.go``):
its CPU topology, the CPUs no pod may be bound to, the kubelet's CPU manager policy, the NUMA topology
policy and each NUMA node's resources. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from koord.scheduler.framework import NodeInfo, Obj
from koord.scheduler.plugins.nodenumaresource.cputopology import EMPTY, CPUTopology
from koordshared.apis.core.resources import value_of
from koordshared.apis.extension.numa import (
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    NodeCPUBindPolicy,
    NUMATopologyPolicy,
)
from koordshared.apis.meta.cpulist import parse_cpuset
from koordshared.apis.meta.quantity import parse_quantity
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.apis.topology.noderesourcetopology import ZONE_TYPE_NODE, zones_of
from koordshared.runtime.errors import InvalidValue

T = TypeVar("T")

KUBELET_FULL_PCPUS_ONLY = "full-pcpus-only"
"""The kubelet's static-policy option that makes a node bind whole cores only."""

_NRT_POLICIES = {
    "BestEffort": NUMATopologyPolicy.BEST_EFFORT,
    "Restricted": NUMATopologyPolicy.RESTRICTED,
    "SingleNUMANodePodLevel": NUMATopologyPolicy.SINGLE_NUMA_NODE,
}


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    """One node's report, parsed once per change of its NodeResourceTopology."""

    topology: CPUTopology = EMPTY
    reserved_cpus: frozenset[int] = frozenset()
    kubelet_policy: nrt.KubeletCPUManagerPolicy | None = None
    numa_policy: NUMATopologyPolicy = NUMATopologyPolicy.NONE
    numa_resources: tuple[tuple[int, Mapping[str, int]], ...] = ()
    """``(NUMA node, allocatable)`` by node id, cpu less the reserved CPUs there."""
    max_refs: int = 1
    """How many pods may share a CPU (1: none; another plugin may raise it)."""
    reported: bool = False
    """False: the node has no NodeResourceTopology (not reported yet)."""
    problems: tuple[str, ...] = field(default=(), compare=False)
    fingerprint: str = ""
    """Equal for reports that place pods alike (topology, kept CPUs, NUMA resources, policies): lets
    identical nodes share what was computed for one."""

    def numa_nodes(self) -> list[int]:
        return [n for n, _ in self.numa_resources]


NOT_REPORTED = TopologyOptions()


def _read(
    problems: list[str], fn: Callable[[Mapping[str, str]], T], annotations: Mapping[str, str], default: T
) -> T:
    try:
        return fn(annotations)
    except InvalidValue as err:
        problems.append(str(err))
        return default


def options_of(obj: Mapping[str, Any]) -> TopologyOptions:
    """Koordinator's ``NewTopologyOptions`` for an NRT object's JSON."""
    meta = obj.get("metadata") or {}
    raw = meta.get("annotations") or {}
    annotations = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
    problems: list[str] = []
    none_allocs: tuple[nrt.PodCPUAlloc, ...] = ()
    none_cpus: tuple[nrt.CPUDetail, ...] = ()
    allocs = _read(problems, nrt.pod_cpu_allocs, annotations, none_allocs)
    kubelet = _read(problems, nrt.kubelet_cpu_manager_policy, annotations, None)
    reservation = _read(problems, nrt.node_reservation, annotations, nrt.NodeReservation())
    details = _read(problems, nrt.cpu_topology, annotations, none_cpus)
    system_qos = _read(problems, nrt.system_qos_resource, annotations, nrt.SystemQOSResource())
    reserved: set[int] = set()
    for a in allocs:
        if a.managed_by_kubelet and a.uid and a.cpuset:
            reserved |= parse_cpuset(a.cpuset)
    if kubelet is not None and kubelet.reserved_cpus:
        reserved |= parse_cpuset(kubelet.reserved_cpus)
    if reservation.reserved_cpus:
        reserved |= parse_cpuset(reservation.reserved_cpus)
    reserved |= system_qos.exclusive_cpus
    topo = CPUTopology.of(details)
    policy = NUMATopologyPolicy.NONE
    for p in obj.get("topologyPolicies") or ():
        if p in _NRT_POLICIES:
            policy = _NRT_POLICIES[p]
            break
    numa = []
    try:
        zones = zones_of(obj)
    except InvalidValue as err:
        problems.append(str(err))
        zones = ()
    for z in zones:
        if z.type != ZONE_TYPE_NODE or not z.name.startswith("node-"):
            continue
        try:
            node = int(z.name.removeprefix("node-"))
            res = {r.name: value_of(r.name, parse_quantity(r.allocatable)) for r in z.resources}
        except (ValueError, InvalidValue) as err:
            problems.append(f"zone {z.name}: {err}")
            continue
        if res.get("cpu"):
            kept = len(reserved & topo.cpus_by_node.get(node, frozenset()))
            res["cpu"] -= kept * 1000
        numa.append((node, res))
    numa.sort(key=lambda e: e[0])
    fingerprint = repr(
        (
            [(c.id, c.core, c.socket, c.node) for c in details],
            sorted(reserved),
            numa,
            str(policy),
            None if kubelet is None else (kubelet.policy, sorted(kubelet.options.items())),
        )
    )
    return TopologyOptions(
        topology=topo,
        reserved_cpus=frozenset(reserved),
        kubelet_policy=kubelet,
        numa_policy=policy,
        numa_resources=tuple(numa),
        reported=True,
        problems=tuple(problems),
        fingerprint=hashlib.sha1(fingerprint.encode()).hexdigest(),
    )


def full_pcpus_only(kubelet: nrt.KubeletCPUManagerPolicy | None) -> bool:
    """A static kubelet with the ``full-pcpus-only`` option."""
    return (
        kubelet is not None
        and kubelet.policy == nrt.KUBELET_POLICY_STATIC
        and kubelet.options.get(KUBELET_FULL_PCPUS_ONLY) == "true"
    )


def node_cpu_bind_policy(labels: Mapping[str, str], kubelet: nrt.KubeletCPUManagerPolicy | None) -> str:
    """Koordinator's ``GetNodeCPUBindPolicy``: ``FullPCPUsOnly`` from the label or a static kubelet with
    ``full-pcpus-only``, ``SpreadByPCPUs`` from the label, else ``None``."""
    label = labels.get(LABEL_NODE_CPU_BIND_POLICY, "")
    if label == NodeCPUBindPolicy.FULL_PCPUS_ONLY or full_pcpus_only(kubelet):
        return NodeCPUBindPolicy.FULL_PCPUS_ONLY
    if label == NodeCPUBindPolicy.SPREAD_BY_PCPUS:
        return NodeCPUBindPolicy.SPREAD_BY_PCPUS
    return NodeCPUBindPolicy.NONE


def numa_policy_of(labels: Mapping[str, str], reported: NUMATopologyPolicy) -> NUMATopologyPolicy:
    """The node label ``numa-topology-policy`` when it names a policy, else the NRT's."""
    try:
        label = NUMATopologyPolicy(labels.get(LABEL_NUMA_TOPOLOGY_POLICY, ""))
    except ValueError:
        label = NUMATopologyPolicy.NONE
    return label if label is not NUMATopologyPolicy.NONE else reported


def labels_of(node: Obj) -> Mapping[str, str]:
    """The node's labels as the API server keeps them (strings: it refuses anything else), not copied:
    this is read several times per node and pod."""
    return cast(Mapping[str, str], (node.get("metadata") or {}).get("labels") or {})


def node_name(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def steers_by_labels(ni: NodeInfo) -> bool:
    """Whether the node's labels steer binding or NUMA placement (then every pod needs a look)."""
    labels = labels_of(ni.node or {})
    return bool(labels.get(LABEL_NUMA_TOPOLOGY_POLICY)) or labels.get(LABEL_NODE_CPU_BIND_POLICY, "") in (
        NodeCPUBindPolicy.FULL_PCPUS_ONLY,
        NodeCPUBindPolicy.SPREAD_BY_PCPUS,
    )
