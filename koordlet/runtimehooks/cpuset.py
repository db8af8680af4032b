"""``CPUSetAllocator``: containers run on the CPUs the scheduler chose, or on the node's share pools
(Koordinator's ``hooks/cpuset``: ``cpuset.go`` and ``rule.go getContainerCPUSet``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Iterable

from koordlet import api
from koordlet.runtimehooks.protocol import (
    NOTHING,
    ContainerRequest,
    PodRequest,
    Resources,
    Rule,
    bound_cpuset,
)
from koordshared.apis.extension import numa
from koordshared.apis.meta.cpulist import format_cpuset
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.errors import InvalidValue

BOUND_QOS = frozenset({api.QOSClass.LSE, api.QOSClass.LSR})


def _join(pools: Iterable[nrt.CPUSharedPool]) -> str:
    return format_cpuset(nrt.pool_cpus(pools))


def _numa_nodes(pod: api.PodInfo) -> tuple[int, ...]:
    try:
        return numa.resource_status(pod.annotations).numa_nodes_with_cpu()
    except InvalidValue:
        return ()


def container_cpuset(req: ContainerRequest, rule: Rule) -> str:
    """The cpuset rules 1-7 give the container; ``""``: leave it as it is."""
    bound = bound_cpuset(req.pod.annotations)
    if bound:
        return bound
    if rule.share_pools is None:
        return ""  # the node's pools are not known yet
    nodes = _numa_nodes(req.pod)
    if nodes:
        if req.qos is api.QOSClass.BE and rule.be_cpu_manager:
            return _join(p for p in rule.be_share_pools if p.node in nodes)
        if req.qos is not api.QOSClass.BE:
            return _join(p for p in rule.share_pools if p.node in nodes)
    if req.qos is api.QOSClass.SYSTEM and rule.system_qos_cpuset:
        return rule.system_qos_cpuset
    if req.qos is api.QOSClass.LS:
        return _join(rule.share_pools)
    if req.pod.kube_qos is api.KubeQOSClass.BESTEFFORT:
        return ""
    if rule.kubelet_policy == nrt.KUBELET_POLICY_STATIC:
        return ""
    return _join(rule.share_pools)


def _unset_quota(pod: api.PodInfo, qos: api.QOSClass, rule: Rule) -> bool:
    return rule.unset_cpu_quota and qos in BOUND_QOS and bool(bound_cpuset(pod.annotations))


class CPUSetAllocator:
    name = "CPUSetAllocator"

    def pod(self, req: PodRequest, rule: Rule) -> Resources:
        return Resources(cfs_quota=-1) if _unset_quota(req.pod, req.qos, rule) else NOTHING

    def container(self, req: ContainerRequest, rule: Rule) -> Resources:
        cpuset = container_cpuset(req, rule)
        quota = -1 if _unset_quota(req.pod, req.qos, rule) else None
        return Resources(cpuset=cpuset or None, cfs_quota=quota)
