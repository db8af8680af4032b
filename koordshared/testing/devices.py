"""Builders of Koordinator ``Device`` objects and of nodes that have the devices, for DeviceShare's tests
and plugin authors (this host has no accelerators: tests describe them).

    device("n1", gpu(0), gpu(1, numa=1, pcie="pci1"), rdma(0, pcie="pci0"))
    device_node("n1", gpus=2, gpu_memory="16Gi")   # a Node whose allocatable lists them
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordshared.apis.meta.groups import DEVICES
from koordshared.apis.meta.quantity import format_bytes, parse_quantity
from koordshared.apis.scheduling import device as dv
from koordshared.testing.objects import node


def _topology(numa: int, pcie: str, socket: int, bus: str) -> dict[str, Any]:
    return {"socketID": socket, "nodeID": numa, "pcieID": pcie, "busID": bus}


def gpu(
    minor: int,
    memory: str = "16Gi",
    *,
    numa: int | None = 0,
    pcie: str = "pci0",
    socket: int = 0,
    healthy: bool = True,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One GPU (``numa=None``: no topology); id ``GPU-<minor>``."""
    out: dict[str, Any] = {
        "type": dv.GPU,
        "id": f"GPU-{minor}",
        "minor": minor,
        "health": healthy,
        "resources": {
            dv.RESOURCE_GPU_CORE: "100",
            dv.RESOURCE_GPU_MEMORY_RATIO: "100",
            dv.RESOURCE_GPU_MEMORY: memory,
        },
        "labels": dict(labels or {}),
    }
    if numa is not None:
        out["topology"] = _topology(numa, pcie, socket, f"0000:{0x10 + minor:02x}:00.0")
    return out


def rdma(
    minor: int,
    *,
    numa: int = 0,
    pcie: str = "pci0",
    socket: int = 0,
    healthy: bool = True,
    vfs: int = 0,
    vf_labels: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One RDMA NIC (``koordinator.sh/rdma`` 100) with ``vfs`` virtual functions in one group."""
    bus = f"0000:{0x80 + minor:02x}:00.0"
    out: dict[str, Any] = {
        "type": dv.RDMA,
        "id": bus,
        "minor": minor,
        "health": healthy,
        "resources": {dv.RESOURCE_RDMA: "100"},
        "topology": _topology(numa, pcie, socket, bus),
        "labels": dict(labels or {}),
    }
    if vfs:
        out["vfGroups"] = [
            {
                "labels": dict(vf_labels or {}),
                "vfs": [{"minor": i, "busID": f"0000:{0x80 + minor:02x}:00.{i + 1}"} for i in range(vfs)],
            }
        ]
    return out


def fpga(minor: int, *, numa: int = 0, pcie: str = "pci0", healthy: bool = True) -> dict[str, Any]:
    return {
        "type": dv.FPGA,
        "id": f"FPGA-{minor}",
        "minor": minor,
        "health": healthy,
        "resources": {dv.RESOURCE_FPGA: "100"},
        "topology": _topology(numa, pcie, 0, f"0000:{0xC0 + minor:02x}:00.0"),
    }


def device(
    node_name: str,
    *devices: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The node's Device object (cluster-scoped, named after the node)."""
    return {
        "apiVersion": DEVICES.api_version,
        "kind": DEVICES.kind,
        "metadata": {"name": node_name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {"devices": [dict(d) for d in devices]},
    }


def device_node(
    name: str,
    *,
    gpus: int = 0,
    gpu_memory: str = "16Gi",
    rdmas: int = 0,
    fpgas: int = 0,
    cpu: str = "32",
    memory: str = "128Gi",
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node whose allocatable lists its devices as Koordinator's node resource controller and the device
    plugin report them (``koordinator.sh/gpu-*`` summed over the GPUs, ``nvidia.com/gpu``, ``rdma``...)."""
    n = node(name, cpu, memory, labels=labels)
    extra: dict[str, str] = {}
    if gpus:
        extra.update(
            {
                dv.RESOURCE_GPU_CORE: str(100 * gpus),
                dv.RESOURCE_GPU_MEMORY_RATIO: str(100 * gpus),
                dv.RESOURCE_GPU_MEMORY: format_bytes(int(parse_quantity(gpu_memory)) * gpus),
                dv.RESOURCE_NVIDIA_GPU: str(gpus),
            }
        )
    if rdmas:
        extra[dv.RESOURCE_RDMA] = str(100 * rdmas)
    if fpgas:
        extra[dv.RESOURCE_FPGA] = str(100 * fpgas)
    for part in ("allocatable", "capacity"):
        n["status"][part].update(extra)
    return n
