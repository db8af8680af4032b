"""The node's topology status (zones, policies, Koordinator's annotations), computed from what the host
and the informer know; koordlet's ``nodeTopoInformer.calcNodeTopo``. Pure: no I/O.

Share pools (``cpu-shared-pools``) are the CPUs no pod has bound: every CPU, minus those the kubelet's
static policy gave containers (``pod-cpu-allocs``), minus every ``resource-status`` cpuset of an active pod,
minus the node reservation's CPUs and the exclusive system-QoS CPUs; BE share pools
(``be-cpu-shared-pools``) keep the CPUs of LSR pods (BE may share those) and lose only LSE's. The kubelet's
own reserved CPUs stay in the pools (a Burstable pod must always have somewhere to run), as in koordlet.
Only active (Pending/Running) pods hold CPUs here; koordlet also counts finished pods still listed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koordlet import api
from koordlet.statesinformer.kubeletconfig import (
    STATIC,
    CPUManagerCheckpoint,
    KubeletConfig,
    static_reserved_cpus,
    take_by_topology,
)
from koordlet.system.numa import HUGEPAGE_1G_KB, HUGEPAGE_2M_KB, CPUFacts, NUMANodeMemory
from koordshared.apis.extension.numa import dumps, resource_status
from koordshared.apis.meta.cpulist import format_cpuset, parse_cpuset
from koordshared.apis.meta.quantity import format_bytes, format_decimal, format_milli, parse_quantity
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.errors import InvalidValue
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
_refusals = OncePerChange(log)


@dataclass(frozen=True, slots=True)
class TopologyInputs:
    """Everything the status is computed from."""

    cpus: Sequence[api.CPUInfo]
    numa: Sequence[NUMANodeMemory]
    facts: CPUFacts
    node: api.NodeInfo | None
    pods: Sequence[api.PodInfo]
    kubelet: KubeletConfig | None
    """``None``: not asked (``--disable-query-kubelet-config``): no policy, no kubelet allocations."""
    checkpoint: CPUManagerCheckpoint
    hugepage_report: bool = False
    """Gate ``HugePageReport``: huge pages are reported per zone and taken out of its memory."""


def _details(cpus: Sequence[api.CPUInfo]) -> list[nrt.CPUDetail]:
    return [nrt.CPUDetail(c.cpu, c.core, c.socket, c.node) for c in sorted(cpus, key=lambda c: c.cpu)]


def _bound_cpus(pod: api.PodInfo) -> frozenset[int]:
    try:
        return resource_status(pod.annotations).cpus
    except InvalidValue as err:
        _refusals.warning(f"pod {pod.uid} status", f"pod {pod.namespace}/{pod.name}: ignoring {err}")
        return frozenset()


def kubelet_allocs(checkpoint: CPUManagerCheckpoint, pods: Sequence[api.PodInfo]) -> list[nrt.PodCPUAlloc]:
    """Pods whose CPUs the kubelet's static policy assigned (koordlet's ``calGuaranteedCpu``): checkpoint
    entries, except pods Koordinator manages (labelled LS or BE, or bound by the scheduler)."""
    known = {p.uid: p for p in pods}
    managed = {p.uid for p in pods if p.qos_raw in (api.QOSClass.LS, api.QOSClass.BE) or _bound_cpus(p)}
    out = []
    for uid, containers in checkpoint.entries.items():
        if uid in managed:
            continue
        cpus: set[int] = set()
        for text in containers.values():
            try:
                cpus |= parse_cpuset(text)
            except InvalidValue:
                continue
        if not cpus:
            continue
        pod = known.get(uid)
        out.append(
            nrt.PodCPUAlloc(
                pod.namespace if pod else "", pod.name if pod else "", uid, format_cpuset(cpus), True
            )
        )
    return sorted(out, key=lambda a: a.uid)


def node_reservation(node: api.NodeInfo | None, cpus: Sequence[api.CPUInfo]) -> nrt.NodeReservation:
    """The node's reservation annotation with its CPUs named: ``reservedCPUs`` as given, else as many
    CPUs as ``resources.cpu`` rounds up to, taken by topology (koordlet's ``getNodeReserved``)."""
    annotations = node.annotations if node is not None else {}
    try:
        got = nrt.node_reservation(annotations)
    except InvalidValue as err:
        _refusals.warning("node reservation", f"node: ignoring {err}")
        return nrt.NodeReservation()
    if got.reserved_cpus or "cpu" not in got.resources:
        return got
    try:
        milli = int(parse_quantity(got.resources["cpu"]) * 1000)
    except InvalidValue:
        return got
    taken = take_by_topology(cpus, -(-milli // 1000)) if milli > 0 else frozenset()
    return nrt.NodeReservation(got.resources, format_cpuset(taken), got.apply_policy)


def system_qos(node: api.NodeInfo | None) -> nrt.SystemQOSResource:
    try:
        return nrt.system_qos_resource(node.annotations if node is not None else {})
    except InvalidValue as err:
        _refusals.warning("system qos", f"node: ignoring {err}")
        return nrt.SystemQOSResource()


def share_pools(
    inputs: TopologyInputs, allocs: Sequence[nrt.PodCPUAlloc], reservation: nrt.NodeReservation
) -> tuple[tuple[nrt.CPUSharedPool, ...], tuple[nrt.CPUSharedPool, ...]]:
    """``(LS pools, BE pools)`` (module doc); a pool whose CPUs are all taken stays, with no cpuset."""
    details = _details(inputs.cpus)
    free = {d.id for d in details} - nrt.pool_cpus(nrt.CPUSharedPool(0, 0, a.cpuset) for a in allocs)
    ls, be = set(free), set(free)
    for pod in inputs.pods:
        if not pod.is_active:
            continue
        bound = _bound_cpus(pod)
        ls -= bound
        if pod.qos_raw is api.QOSClass.LSE:
            be -= bound
    taken = parse_cpuset(reservation.reserved_cpus) | system_qos(inputs.node).exclusive_cpus

    def pools(keep: set[int]) -> tuple[nrt.CPUSharedPool, ...]:
        # Pools are formed first and trimmed after, so a NUMA node left without CPUs keeps its entry.
        formed = nrt.pools_from_cpus(d for d in details if d.id in keep)
        return tuple(
            nrt.CPUSharedPool(p.socket, p.node, format_cpuset(parse_cpuset(p.cpuset) - taken)) for p in formed
        )

    return pools(ls), pools(be)


def _zones(inputs: TopologyInputs) -> tuple[nrt.Zone, ...]:
    per_node: dict[int, int] = {}
    for c in inputs.cpus:
        per_node[c.node] = per_node.get(c.node, 0) + 1
    numa = {n.node: n for n in inputs.numa}
    ids = sorted(set(numa) | set(per_node))
    node = inputs.node
    reserve = node is not None and node.labels.get(nrt.LABEL_ENABLE_NUMA_RESERVATION) == "true"
    cpu_cut = mem_cut = 0
    if reserve and node is not None and ids:
        # capacity - allocatable of the Node, a ceiling share on each NUMA node (allocatable only)
        cpu_cut = -(-max(node.cpu_capacity_milli - node.cpu_allocatable_milli, 0) // len(ids))
        mem_cut = -(-max(node.memory_capacity_bytes - node.memory_allocatable_bytes, 0) // len(ids))
    zones = []
    for i in ids:
        mem = numa.get(i)
        hp2 = mem.hugepage_bytes(HUGEPAGE_2M_KB) if mem is not None and inputs.hugepage_report else 0
        hp1 = mem.hugepage_bytes(HUGEPAGE_1G_KB) if mem is not None and inputs.hugepage_report else 0
        memory = max((mem.total_bytes if mem is not None else 0) - hp2 - hp1, 0)
        cpus = per_node.get(i, 0)
        cpu, mem_text = format_decimal(cpus), format_bytes(memory)
        rows = (
            ("cpu", cpu, format_milli(max(cpus * 1000 - cpu_cut, 0)) if cpu_cut else cpu),
            ("hugepages-1Gi", format_bytes(hp1), format_bytes(hp1)),
            ("hugepages-2Mi", format_bytes(hp2), format_bytes(hp2)),
            ("memory", mem_text, format_bytes(max(memory - mem_cut, 0)) if mem_cut else mem_text),
        )
        resources = tuple(nrt.ResourceInfo(name, cap, alloc, alloc) for name, cap, alloc in rows)
        zones.append(nrt.Zone(nrt.zone_name(i), nrt.ZONE_TYPE_NODE, resources))
    return tuple(sorted(zones, key=lambda z: z.name))


def build(inputs: TopologyInputs) -> nrt.NodeTopologyStatus:
    """The status koordlet would report for these inputs."""
    policy = nrt.KubeletCPUManagerPolicy()
    allocs: list[nrt.PodCPUAlloc] = []
    topology_policy = nrt.POLICY_NONE
    if inputs.kubelet is not None:
        k = inputs.kubelet
        reserved = static_reserved_cpus(k, inputs.cpus)
        policy = nrt.KubeletCPUManagerPolicy(
            k.cpu_manager_policy, k.cpu_manager_policy_options, format_cpuset(reserved)
        )
        if k.cpu_manager_policy == STATIC:
            allocs = kubelet_allocs(inputs.checkpoint, inputs.pods)
        topology_policy = nrt.topology_policy(k.topology_manager_policy, k.topology_manager_scope)
    reservation = node_reservation(inputs.node, inputs.cpus)
    ls_pools, be_pools = share_pools(inputs, allocs, reservation)
    f = inputs.facts
    basic = nrt.CPUBasicInfo(f.model, f.hyper_threading, f.turbo, f.l3_cbm_mask, f.vendor)
    annotations = {
        nrt.ANNOTATION_CPU_BASIC_INFO: dumps(basic.to_json()),
        nrt.ANNOTATION_CPU_TOPOLOGY: nrt.cpu_topology_json(_details(inputs.cpus)),
        nrt.ANNOTATION_CPU_SHARED_POOLS: nrt.share_pools_json(ls_pools),
        nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: dumps(policy.to_json()),
        nrt.ANNOTATION_BE_CPU_SHARED_POOLS: nrt.share_pools_json(be_pools),
        nrt.ANNOTATION_POD_CPU_ALLOCS: nrt.pod_cpu_allocs_json(allocs),
        nrt.ANNOTATION_NODE_RESERVATION: dumps(reservation.to_json()),
        nrt.ANNOTATION_SYSTEM_QOS_RESOURCE: dumps(system_qos(inputs.node).to_json()),
    }
    labels: Mapping[str, str] = {}
    node = inputs.node
    if node is not None and node.labels.get(nrt.LABEL_ENABLE_NUMA_RESERVATION):
        labels = {nrt.LABEL_ENABLE_NUMA_RESERVATION: node.labels[nrt.LABEL_ENABLE_NUMA_RESERVATION]}
    return nrt.NodeTopologyStatus(_zones(inputs), topology_policy, annotations, labels)
