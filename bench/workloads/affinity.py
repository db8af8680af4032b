"""kube-scheduler's ``SchedulingPodAntiAffinity`` (``scheduler_perf/affinity/performance-config.yaml``,
workload ``5000Nodes_2000Pods``: a threshold of 60 pods/s in kube-scheduler's CI): nodes of 4 cpu,
32Gi and 110 pods; 1000 pods placed first in namespace ``sched-0``, then 2000 measured pods in
``sched-1``. Every pod is labelled ``color: green``, requests 100m cpu and 500Mi, and has a required pod
anti-affinity to ``color: green`` in both namespaces on ``kubernetes.io/hostname``: each pod takes a
node of its own, so the n-th pod's cycle finds its node among n-1 taken ones.

Unlike scheduler_perf's node template, the nodes carry the ``kubernetes.io/hostname`` label (a kubelet
sets it), so the anti-affinity does constrain the placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from koordshared.testing.objects import node, pod

HOSTNAME = "kubernetes.io/hostname"
NAMESPACES = ("sched-0", "sched-1")


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    init_pods: list[dict[str, Any]] = field(default_factory=list)
    """Scheduled first, not measured."""
    measure_pods: list[dict[str, Any]] = field(default_factory=list)


def _anti_affinity_pod(name: str, namespace: str, scheduler_name: str) -> dict[str, Any]:
    p = pod(
        name,
        namespace=namespace,
        uid=f"{namespace}-{name}",
        labels={"color": "green"},
        requests={"cpu": "100m", "memory": "500Mi"},
        limits={"cpu": "100m", "memory": "500Mi"},
        scheduler_name=scheduler_name,
    )
    p["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"color": "green"}},
                    "topologyKey": HOSTNAME,
                    "namespaces": list(reversed(NAMESPACES)),
                }
            ]
        }
    }
    return p


def pod_anti_affinity(
    nodes: int = 5000,
    init_pods: int = 1000,
    measure_pods: int = 2000,
    scheduler_name: str = "koord-scheduler",
) -> Workload:
    """``SchedulingPodAntiAffinity`` at the given size (defaults: ``5000Nodes_2000Pods``)."""
    return Workload(
        name=f"SchedulingPodAntiAffinity/{nodes}Nodes_{measure_pods}Pods",
        nodes=[
            node(f"scheduler-perf-{i:05d}", "4", "32Gi", labels={HOSTNAME: f"scheduler-perf-{i:05d}"})
            for i in range(nodes)
        ],
        init_pods=[
            _anti_affinity_pod(f"init-{i:05d}", NAMESPACES[0], scheduler_name) for i in range(init_pods)
        ],
        measure_pods=[
            _anti_affinity_pod(f"anti-affinity-pod-{i:05d}", NAMESPACES[1], scheduler_name)
            for i in range(measure_pods)
        ],
    )
