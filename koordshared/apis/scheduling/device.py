"""Koordinator's ``Device`` (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, one per node, named
after it; ``apis/scheduling/v1alpha1/device_types.go``) and the device vocabulary of
``apis/extension/device_share.go`` that describes nodes and devices: resource names, node and Device labels,
and the GPU partition table a Device may carry.

A Device lists the node's devices (``spec.devices``): type (``gpu``, ``rdma``, ``fpga``), ``minor``, ``id``
(UUID or PCI address), health, resources per device (a GPU: ``koordinator.sh/gpu-core`` 100,
``koordinator.sh/gpu-memory-ratio`` 100, ``koordinator.sh/gpu-memory`` its memory; an RDMA NIC or an FPGA:
``koordinator.sh/rdma`` / ``koordinator.sh/fpga`` 100), topology (socket, NUMA node, PCIe switch, bus id),
labels, and virtual-function groups. Resources are in the scheduler's units (:func:`value_of`). Pure: stdlib
only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from koordshared.apis.core.pod import as_list, as_map, str_map
from koordshared.apis.core.resources import parse_resource_list, unit_values, value_of
from koordshared.apis.meta.quantity import parse_quantity

GPU, RDMA, FPGA = "gpu", "rdma", "fpga"
DEVICE_TYPES = (GPU, RDMA, FPGA)

DOMAIN = "koordinator.sh/"
RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_HYGON_DCU = "dcu.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_RDMA = DOMAIN + "rdma"
RESOURCE_FPGA = DOMAIN + "fpga"
RESOURCE_GPU = DOMAIN + "gpu"
RESOURCE_GPU_SHARED = DOMAIN + "gpu.shared"
RESOURCE_GPU_CORE = DOMAIN + "gpu-core"
RESOURCE_GPU_MEMORY = DOMAIN + "gpu-memory"
RESOURCE_GPU_MEMORY_RATIO = DOMAIN + "gpu-memory-ratio"
RESOURCE_HUAWEI_NPU_CORE = "huawei.com/npu-core"
RESOURCE_HUAWEI_NPU_CPU = "huawei.com/npu-cpu"
RESOURCE_HUAWEI_NPU_DVPP = "huawei.com/npu-dvpp"

NODE_DOMAIN = "node.koordinator.sh"
LABEL_GPU_PARTITION_POLICY = NODE_DOMAIN + "/gpu-partition-policy"
LABEL_GPU_VENDOR = NODE_DOMAIN + "/gpu-vendor"
LABEL_GPU_MODEL = NODE_DOMAIN + "/gpu-model"
LABEL_SECONDARY_DEVICE_WELL_PLANNED = NODE_DOMAIN + "/secondary-device-well-planned"
LABEL_GPU_ISOLATION_PROVIDER = DOMAIN + "gpu-isolation-provider"
ANNOTATION_GPU_PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"
"""On a Device: the GPU partition table (number of GPUs -> the partitions that may be allocated together)."""

GPU_VENDOR_NVIDIA = "nvidia"
PARTITION_POLICY_HONOR, PARTITION_POLICY_PREFER = "Honor", "Prefer"


@dataclass(frozen=True, slots=True)
class DeviceTopology:
    socket_id: int
    node_id: int
    """The NUMA node (-1: unknown)."""
    pcie_id: str
    bus_id: str = ""


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class VFGroup:
    labels: Mapping[str, str]
    vfs: tuple[VirtualFunction, ...]


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One entry of ``spec.devices``."""

    type: str
    minor: int
    uuid: str = ""
    health: bool = False
    resources: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    topology: DeviceTopology | None = None
    vf_groups: tuple[VFGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class GPUPartition:
    """GPUs that are allocated together well (NVLink...), with how good the set is."""

    minors: tuple[int, ...]
    link_type: str = ""
    ring_bus_bandwidth: Fraction | None = None
    allocation_score: int = 0

    @property
    def minors_hash(self) -> int:
        """The minors as a bit set (Koordinator's ``hashMinors``)."""
        out = 0
        for m in self.minors:
            out |= 1 << m
        return out


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _topology(raw: Any) -> DeviceTopology | None:
    if not isinstance(raw, Mapping):
        return None
    return DeviceTopology(
        _int(raw.get("socketID")),
        _int(raw.get("nodeID")),
        str(raw.get("pcieID") or ""),
        str(raw.get("busID") or ""),
    )


def _vf_groups(raw: Any) -> tuple[VFGroup, ...]:
    groups = []
    for g in raw if isinstance(raw, list) else ():
        if not isinstance(g, Mapping):
            continue
        vfs = tuple(
            VirtualFunction(_int(v.get("minor")), str(v.get("busID") or ""))
            for v in as_list(g, "vfs")
            if isinstance(v, Mapping)
        )
        groups.append(VFGroup(str_map(as_map(g, "labels")), vfs))
    return tuple(groups)


def resource_values(raw: Any) -> dict[str, int]:
    """A ResourceList in the scheduler's units (entries that are not quantities are left out)."""
    fast = unit_values(raw)
    if fast is not None:
        return fast
    return {name: value_of(name, q) for name, q in parse_resource_list(raw).items()}


def _entries(device: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [d for d in as_list(as_map(device, "spec"), "devices") if isinstance(d, Mapping)]


def device_ids(device: Mapping[str, Any]) -> dict[tuple[str, int], str]:
    """Each device's id by type and minor, as :func:`device_infos` reads them (without parsing the
    resources, which PreBind does not need)."""
    return {
        (str(d.get("type") or ""), _int(d.get("minor"))): str(d.get("id") or "") for d in _entries(device)
    }


def device_infos(device: Mapping[str, Any]) -> list[DeviceInfo]:
    """The devices of a Device object, in order. An entry without a minor is Koordinator's minor 0."""
    out = []
    for d in _entries(device):
        out.append(
            DeviceInfo(
                type=str(d.get("type") or ""),
                minor=_int(d.get("minor")),
                uuid=str(d.get("id") or ""),
                health=d.get("health") is True,
                resources=resource_values(d.get("resources")),
                labels=str_map(as_map(d, "labels")),
                topology=_topology(d.get("topology")),
                vf_groups=_vf_groups(d.get("vfGroups")),
            )
        )
    return out


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(obj, "metadata"), "labels")


def partition_policy(obj: Mapping[str, Any] | None) -> str:
    """``Honor`` when a node's or Device's partition-policy label says so, else ``Prefer``."""
    labelled = labels_of(obj).get(LABEL_GPU_PARTITION_POLICY) if obj is not None else None
    return PARTITION_POLICY_HONOR if labelled == PARTITION_POLICY_HONOR else PARTITION_POLICY_PREFER


def secondary_device_well_planned(device: Mapping[str, Any]) -> bool:
    return labels_of(device).get(LABEL_SECONDARY_DEVICE_WELL_PLANNED) == "true"


def gpu_partition_table(device: Mapping[str, Any]) -> dict[int, list[GPUPartition]] | None:
    """The Device's partition table (``None``: it has none); ``ValueError`` (or :class:`InvalidValue`)
    when it does not parse."""
    text = as_map(as_map(device, "metadata"), "annotations").get(ANNOTATION_GPU_PARTITIONS)
    if not text:
        return None
    doc = json.loads(str(text))
    if not isinstance(doc, Mapping):
        raise ValueError(f"invalid gpu partitions in device cr: {text}")
    table: dict[int, list[GPUPartition]] = {}
    for count, partitions in doc.items():
        if not isinstance(partitions, list):
            raise ValueError(f"invalid gpu partitions in device cr: {text}")
        table[int(count)] = [_partition(p) for p in partitions if isinstance(p, Mapping)]
    return table


def _partition(raw: Mapping[str, Any]) -> GPUPartition:
    bandwidth = raw.get("ringBusBandwidth")
    return GPUPartition(
        tuple(_int(m) for m in as_list(raw, "minors")),
        str(raw.get("gpuLinkType") or ""),
        None if bandwidth is None else parse_quantity(bandwidth),
        _int(raw.get("allocationScore")),
    )
