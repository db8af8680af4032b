"""Test data for the QoS plugin tests: CPU topologies, pods in their kubepods tier, NodeSLOs."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from koordlet import api
from tests.fakes import QOS_TIER

KUBE_QOS_OF = {
    api.QOSClass.BE: api.KubeQOSClass.BESTEFFORT,
    api.QOSClass.LS: api.KubeQOSClass.BURSTABLE,
    api.QOSClass.LSR: api.KubeQOSClass.GUARANTEED,
    api.QOSClass.LSE: api.KubeQOSClass.GUARANTEED,
    api.QOSClass.SYSTEM: api.KubeQOSClass.BURSTABLE,
    api.QOSClass.NONE: api.KubeQOSClass.BURSTABLE,
}


def topology(
    sockets: int = 1, cores: int = 2, threads: int = 1, numa_per_socket: int = 1
) -> list[api.CPUInfo]:
    """CPUs numbered like Linux does on x86: sibling threads are ``cpu`` and ``cpu + ncores``."""
    ncores = sockets * cores
    out = []
    for t in range(threads):
        for s in range(sockets):
            for c in range(cores):
                core = s * cores + c
                node = s * numa_per_socket + (c * numa_per_socket // cores)
                out.append(api.CPUInfo(cpu=t * ncores + core, core=core, socket=s, node=node))
    return sorted(out, key=lambda c: c.cpu)


def make_pod(
    name: str,
    qos: api.QOSClass = api.QOSClass.BE,
    *,
    kube_qos: api.KubeQOSClass | None = None,
    containers: int = 1,
    cpu_limit_milli: int = 0,
    cpu_request_milli: int = 0,
    batch_cpu_request_milli: int = 0,
    priority: int | None = None,
    phase: str = "Running",
    owner_kind: str = "ReplicaSet",
    annotations: Mapping[str, str] | None = None,
) -> api.PodInfo:
    """A pod with a cgroupfs-layout cgroup dir in its kube QoS tier and ``containers`` containers."""
    uid = str(uuid.uuid4())
    kq = kube_qos or KUBE_QOS_OF[qos]
    pod_dir = f"{QOS_TIER[kq]}/pod{uid}"
    cs = tuple(
        api.ContainerInfo(
            name=f"c{i}",
            container_id=f"{uid[:8]}{i:056x}",
            cgroup_dir=f"{pod_dir}/{uid[:8]}{i:056x}",
            cpu_limit_milli=cpu_limit_milli,
            cpu_request_milli=cpu_request_milli,
            batch_cpu_request_milli=batch_cpu_request_milli,
        )
        for i in range(containers)
    )
    return api.PodInfo(
        uid=uid,
        namespace="default",
        name=name,
        qos=qos,
        kube_qos=kq,
        priority=priority,
        phase=phase,
        owner_kind=owner_kind,
        annotations=dict(annotations or {}),
        cgroup_dir=pod_dir,
        containers=cs,
    )


def be_slo(**threshold: Any) -> api.NodeSLO:
    """A NodeSLO with ``resourceUsedThresholdWithBE.enable`` on and the given fields."""
    return api.NodeSLO(
        resource_used_threshold_with_be=api.ResourceThresholdStrategy(enable=True, **threshold)
    )
