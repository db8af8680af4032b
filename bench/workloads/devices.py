"""The ``SchedulingBasic`` nodes (:mod:`.basic`) each with 8 GPUs described by a Koordinator ``Device`` (two
NUMA nodes, two GPUs per PCIe switch), and GPU pods to schedule with DeviceShare at the points of
Koordinator's shipped profile: one in two asks for a whole GPU (``nvidia.com/gpu: 1``), the other for half of
one (``koordinator.sh/gpu-core: 50``, ``gpu-memory-ratio: 50``)."""

from __future__ import annotations

import time
from typing import Any

from bench.workloads import basic
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.scheduling import device as dv
from koordshared.testing.devices import device, gpu

GPUS = 8
ON = [{"name": "DeviceShare"}]
PLUGINS = {
    "preFilter": {"enabled": ON},
    "filter": {"enabled": ON},
    "score": {"enabled": [{"name": "DeviceShare", "weight": 1}]},
    "reserve": {"enabled": ON},
    "preBind": {"enabled": [*ON, {"name": "DefaultPreBind"}]},
}
WHOLE = {dv.RESOURCE_NVIDIA_GPU: "1"}
HALF = {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY_RATIO: "50"}


def node(i: int) -> dict[str, Any]:
    out = basic.node(i)
    extra = {
        dv.RESOURCE_NVIDIA_GPU: str(GPUS),
        dv.RESOURCE_GPU_CORE: str(100 * GPUS),
        dv.RESOURCE_GPU_MEMORY_RATIO: str(100 * GPUS),
        dv.RESOURCE_GPU_MEMORY: f"{16 * GPUS}Gi",
    }
    for part in ("allocatable", "capacity"):
        out["status"][part].update(extra)
    return out


def cluster(nodes: int, **kwargs: Any) -> MemoryScheduler:
    kit = MemoryScheduler({"profiles": [{"schedulerName": basic.SCHEDULER, "plugins": PLUGINS}]}, **kwargs)
    for i in range(nodes):
        n = node(i)
        kit.add_node(n)
        gpus = [gpu(m, numa=m // 4, pcie=f"pci{m // 2}") for m in range(GPUS)]
        kit.informers["devices"].put(device(n["metadata"]["name"], *gpus))
    return kit


def pod(i: int) -> dict[str, Any]:
    out = basic.pod(f"g-{i}")
    requests = WHOLE if i % 2 == 0 else HALF
    out["spec"]["containers"][0]["resources"] = {
        "requests": {**out["spec"]["containers"][0]["resources"]["requests"], **requests},
        "limits": dict(requests),
    }
    return out


def algorithm(nodes: int, pods: int, *, plain: float) -> dict[str, Any]:
    """Pods/s of GPU pods with DeviceShare, beside ``plain`` (plain pods' pods/s at this node count)."""
    t0 = time.perf_counter()
    kit = cluster(nodes, parallelism=16)
    setup = time.perf_counter() - t0
    run = basic.schedule_all(kit, pod, pods)
    kit.stop()
    assert run["bound"] == pods, run["bound"]
    cycles = sorted(run["cycles"])
    res = {
        f"gpu_pods_per_s_{nodes}": round(pods / run["wall"], 1),
        f"gpu_cycle_p50_ms_{nodes}": round(cycles[len(cycles) // 2] * 1000, 2),
        f"gpu_cycle_p99_ms_{nodes}": round(cycles[min(int(0.99 * len(cycles)), len(cycles) - 1)] * 1000, 2),
        f"gpu_setup_s_{nodes}": round(setup, 1),
    }
    print(
        f"gpu, {nodes} nodes x {GPUS} GPUs, {pods} pods (whole and half GPUs): "
        f"{res[f'gpu_pods_per_s_{nodes}']} pods/s, cycle p50 {res[f'gpu_cycle_p50_ms_{nodes}']} ms "
        f"p99 {res[f'gpu_cycle_p99_ms_{nodes}']} ms (plain workload, same run: {plain} pods/s)",
        flush=True,
    )
    return res
