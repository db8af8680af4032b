"""Test data for plugin tests: pods in their kubepods tier, a node, CPU topologies, NodeSLOs.

Pods get cgroupfs-layout cgroup dirs (``kubepods/besteffort/pod<uid>/<container id>``), the same dirs
:class:`koordlet.testing.FakeHostReader` and the agent's cgroupfs driver use. IDs are random unless given;
:func:`pod_uid` and :func:`container_id` make stable ones from a number.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from koordlet import api

QOS_TIER = {
    api.KubeQOSClass.GUARANTEED: "kubepods",
    api.KubeQOSClass.BURSTABLE: "kubepods/burstable",
    api.KubeQOSClass.BESTEFFORT: "kubepods/besteffort",
}
"""The kube QoS tiers of the cgroupfs driver under the default cgroup root."""

QOS_LABEL = "koordinator.sh/qosClass"

KUBE_QOS_OF = {
    api.QOSClass.BE: api.KubeQOSClass.BESTEFFORT,
    api.QOSClass.LS: api.KubeQOSClass.BURSTABLE,
    api.QOSClass.LSR: api.KubeQOSClass.GUARANTEED,
    api.QOSClass.LSE: api.KubeQOSClass.GUARANTEED,
    api.QOSClass.SYSTEM: api.KubeQOSClass.BURSTABLE,
    api.QOSClass.NONE: api.KubeQOSClass.BURSTABLE,
}
"""The kube QoS tier a pod of each Koordinator class usually sits in."""

_KOORD_QOS_OF = {
    api.KubeQOSClass.BESTEFFORT: api.QOSClass.BE,
    api.KubeQOSClass.BURSTABLE: api.QOSClass.LS,
    api.KubeQOSClass.GUARANTEED: api.QOSClass.LSR,
}


def pod_uid(n: int) -> str:
    """A valid pod UID that names ``n`` (``00000003-0000-4000-8000-000000000003``)."""
    return f"{n:08x}-0000-4000-8000-{n:012x}"


def container_id(n: int) -> str:
    """A valid 64-hex container ID that names ``n``."""
    return f"{n:064x}"


def make_pod(
    name: str = "",
    qos: api.QOSClass | None = None,
    *,
    kube_qos: api.KubeQOSClass | None = None,
    uid: str | None = None,
    cgroup_dir: str | None = None,
    containers: int = 1,
    container_ids: Sequence[str] | None = None,
    runtime: str = "containerd",
    cpu_limit_milli: int = 0,
    cpu_request_milli: int = 0,
    memory_request_bytes: int = 0,
    batch_cpu_request_milli: int = 0,
    batch_memory_request_bytes: int = 0,
    mid_cpu_request_milli: int = 0,
    mid_memory_request_bytes: int = 0,
    priority: int | None = None,
    priority_class: api.PriorityClass = api.PriorityClass.NONE,
    phase: str = "Running",
    owner_kind: str = "ReplicaSet",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> api.PodInfo:
    """A pod with a cgroup dir in its kube QoS tier and ``containers`` containers (or one per ID given).

    A ``qos`` given (or neither ``qos`` nor ``kube_qos``: a BE pod) is the ``koordinator.sh/qosClass``
    label, as Koordinator's webhook sets it; with ``kube_qos`` alone the pod is unlabelled and its class
    defaults from the kube class as the agent does (BestEffort -> BE, Burstable -> LS, Guaranteed -> LSR).
    The kube class defaults from the Koordinator one the other way round. ``cgroup_dir`` places the pod
    elsewhere (a real tree under a test parent); its containers sit below it.
    """
    uid = uid or str(uuid.uuid4())
    pod_labels = dict(labels or {})
    if qos is None and kube_qos is not None:
        qos = _KOORD_QOS_OF[kube_qos]
    else:
        qos = api.QOSClass.BE if qos is None else qos
        if qos is not api.QOSClass.NONE:
            pod_labels.setdefault(QOS_LABEL, qos.value)
    raw = pod_labels.get(QOS_LABEL, "")
    qos_raw = api.QOSClass(raw) if raw in set(api.QOSClass) else api.QOSClass.NONE
    kq = kube_qos or KUBE_QOS_OF[qos]
    pod_dir = cgroup_dir or f"{QOS_TIER[kq]}/pod{uid}"
    ids = list(container_ids or [f"{uid[:8]}{i:056x}" for i in range(containers)])
    cs = tuple(
        api.ContainerInfo(
            name=f"c{i}",
            container_id=cid,
            runtime=runtime,
            cgroup_dir=f"{pod_dir}/{cid}",
            cpu_limit_milli=cpu_limit_milli,
            cpu_request_milli=cpu_request_milli,
            memory_request_bytes=memory_request_bytes,
            batch_cpu_request_milli=batch_cpu_request_milli,
            batch_memory_request_bytes=batch_memory_request_bytes,
            mid_cpu_request_milli=mid_cpu_request_milli,
            mid_memory_request_bytes=mid_memory_request_bytes,
        )
        for i, cid in enumerate(ids)
    )
    return api.PodInfo(
        uid=uid,
        namespace="default",
        name=name or f"pod-{uid[:8]}",
        qos=qos,
        kube_qos=kq,
        priority=priority,
        priority_class=priority_class,
        phase=phase,
        owner_kind=owner_kind,
        labels=pod_labels,
        annotations=dict(annotations or {}),
        cgroup_dir=pod_dir,
        containers=cs,
        qos_raw=qos_raw,
    )


def make_node(cpu_milli: int, memory_bytes: int, **fields: object) -> api.NodeInfo:
    """``node-1`` with this capacity; ``fields`` set any other :class:`api.NodeInfo` field."""
    return api.NodeInfo(
        name="node-1",
        cpu_capacity_milli=cpu_milli,
        memory_capacity_bytes=memory_bytes,
        **fields,  # type: ignore[arg-type]
    )


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


def be_slo(**threshold: object) -> api.NodeSLO:
    """A NodeSLO with ``resourceUsedThresholdWithBE.enable`` on and the given fields (snake_case)."""
    return api.NodeSLO(
        resource_used_threshold_with_be=api.ResourceThresholdStrategy(enable=True, **threshold)  # type: ignore[arg-type]
    )
