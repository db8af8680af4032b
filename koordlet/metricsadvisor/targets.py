"""The cgroup dirs to sample for the pods the states informer lists: each pod dir and container dir.

Layer: ``koordlet.metricsadvisor``. Shared by the pod, BE and PSI collectors. A pod or container whose UID,
ID or directory fails validation is refused (counted by the caller) before any path is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from koordlet import api
from koordlet.api.errors import UnsafePath
from koordlet.system.host import Host

POD = "pod"
CONTAINER = "container"


@dataclass(frozen=True, slots=True)
class Target:
    """One cgroup dir to sample: a pod (``ident`` = pod UID) or a container (``ident`` = container ID)."""

    kind: str
    ident: str
    cgroup_dir: str
    pod_uid: str


def targets_of(host: Host, pods: Sequence[api.PodInfo], collect_containers: bool) -> tuple[list[Target], int]:
    """The pod and container dirs to sample and how many were refused as unsafe."""
    out: list[Target] = []
    unsafe = 0
    layout = host.layout
    for pod in pods:
        try:
            pod_dir = pod.cgroup_dir or layout.pod_dir(pod.uid, pod.kube_qos)
        except UnsafePath:
            unsafe += 1
            continue
        out.append(Target(POD, pod.uid, pod_dir, pod.uid))
        if not collect_containers:
            continue
        for c in pod.containers:
            if not c.container_id or not c.running:
                continue
            try:
                cid = f"{c.runtime}://{c.container_id}" if c.runtime else c.container_id
                cdir = c.cgroup_dir or layout.container_dir(pod.uid, pod.kube_qos, cid)
            except UnsafePath:
                unsafe += 1
                continue
            out.append(Target(CONTAINER, c.container_id, cdir, pod.uid))
    return out, unsafe
