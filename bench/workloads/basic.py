"""kube-scheduler's scheduler_perf ``SchedulingBasic`` shape (``test/integration/scheduler_perf``): nodes
from ``node-default.yaml`` (4 cpu, 32 GiB, 110 pods; one zone label of three), pods from
``pod-default.yaml`` (one container requesting 100m cpu and 500 MiB), some already placed, the rest to
schedule; and the drivers that run koord-scheduler in memory on them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from koord.scheduler.testing import MemoryScheduler

SCHEDULER = "default-scheduler"


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 3}"},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, *, node_name: str = "", uid: str = "", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
        ],
        **extra,
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "sched-perf", "uid": uid or f"uid-{name}", "labels": {}},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def cluster(nodes: int, placed: int, **kwargs: Any) -> MemoryScheduler:
    """``nodes`` nodes and ``placed`` pods bound round-robin, in an in-memory koord-scheduler with the
    default profile (``kwargs`` to :class:`MemoryScheduler`)."""
    kit = MemoryScheduler({"profiles": [{"schedulerName": SCHEDULER}]}, **kwargs)
    for i in range(nodes):
        kit.add_node(node(i))
    for i in range(placed):
        kit.add_pod(pod(f"init-{i}", node_name=f"node-{i % nodes:05d}"))
    return kit


def schedule_all(kit: MemoryScheduler, make: Callable[[int], dict[str, Any]], count: int) -> dict[str, Any]:
    """Queue ``count`` pods, schedule them all; pods/s over the wall time of the whole run (bindings
    included) and each cycle's latency."""
    for i in range(count):
        kit.add_pod(make(i))
    cycles: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        if not kit.scheduler.schedule_next(timeout=0):
            break
        cycles.append(time.perf_counter() - t0)
    kit.scheduler.drain()
    wall = time.perf_counter() - start
    return {"wall": wall, "cycles": cycles, "bound": len(kit.bound())}
