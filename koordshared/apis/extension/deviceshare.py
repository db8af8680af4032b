"""The pod side of Koordinator's device sharing (``apis/extension/device_share.go``): the devices the
scheduler allocated to a pod (``scheduling.koordinator.sh/device-allocated``, written at PreBind, read back by
the scheduler after a restart and by the node agent), and what a pod may ask of the allocation: device
selectors and strategies (``device-allocate-hint``), devices of several types from the same PCIe switch
(``device-joint-allocate``), and GPU partitions (``gpu-partition-spec``).

The allocation annotation is a JSON object, device type -> list of ``{"minor", "resources", "id",
"extension"}``; :func:`format_device_allocations` writes it as Koordinator's scheduler does (Go's
``json.Marshal``: map keys sorted, quantities in their canonical form). Pure: stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from koordshared.apis.core.resources import unit_value, value_of
from koordshared.apis.meta.quantity import format_bytes, format_decimal, parse_quantity
from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.apis.scheduling.device import RESOURCE_GPU_MEMORY, VirtualFunction
from koordshared.runtime.errors import InvalidValue

PREFIX = "scheduling.koordinator.sh"
ANNOTATION_DEVICE_ALLOCATED = PREFIX + "/device-allocated"
ANNOTATION_DEVICE_ALLOCATE_HINT = PREFIX + "/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE = PREFIX + "/device-joint-allocate"
ANNOTATION_GPU_PARTITION_SPEC = PREFIX + "/gpu-partition-spec"

APPLY_FOR_ALL, REQUESTS_AS_COUNT = "ApplyForAll", "RequestsAsCount"
"""Hint allocate strategies: every device (matching the selector), or the request as a device count."""
SCOPE_DEVICE, SCOPE_PCIE, SCOPE_NUMA_NODE, SCOPE_NODE = "Device", "PCIe", "NUMANode", "Node"
TOPOLOGY_SCOPE_LEVEL = {SCOPE_DEVICE: 4, SCOPE_PCIE: 3, SCOPE_NUMA_NODE: 2, SCOPE_NODE: 1}
DEVICE_LEVEL_EXCLUSIVE, PCIE_LEVEL_EXCLUSIVE = "DeviceLevel", "PCIeLevel"
SAME_PCIE_SCOPE = "SamePCIe"
"""The joint-allocate scope: the secondary devices on the PCIe switches of the primary ones."""
PARTITION_RESTRICTED, PARTITION_BEST_EFFORT = "Restricted", "BestEffort"


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """One device given to a pod: its minor, what of it, its id (filled at PreBind from the Device), the
    virtual functions taken on it and the GPU shared-resource template used."""

    minor: int
    resources: Mapping[str, int]
    id: str = ""
    vfs: tuple[VirtualFunction, ...] = ()
    template: str = ""


DeviceAllocations = dict[str, list[DeviceAllocation]]


def _bad(annotation: str, text: str, why: str) -> InvalidValue:
    return InvalidValue(f"annotation {annotation}", text, why)


def _json(annotations: Mapping[str, Any], key: str) -> tuple[Any, str] | None:
    if key not in annotations:
        return None
    text = str(annotations[key])
    try:
        return json.loads(text), text
    except ValueError as err:
        raise _bad(key, text, f"not JSON ({err})") from err


def _resources(raw: Any, key: str, text: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _bad(key, text, "resources must be an object")
    out = {}
    for name, q in raw.items():
        fast = unit_value(str(name), q) if isinstance(q, str | int) else None
        if fast is not None:
            out[str(name)] = fast
            continue
        try:
            out[str(name)] = value_of(str(name), parse_quantity(q))
        except (InvalidValue, TypeError) as err:
            raise _bad(key, text, f"resource {name}: {q!r} is not a quantity") from err
    return out


def parse_device_allocations(annotations: Mapping[str, Any]) -> DeviceAllocations | None:
    """The pod's allocation (``None``: not annotated); :class:`InvalidValue` when it does not parse."""
    found = _json(annotations, ANNOTATION_DEVICE_ALLOCATED)
    if found is None:
        return None
    doc, text = found
    key = ANNOTATION_DEVICE_ALLOCATED
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise _bad(key, text, "want an object of device type -> allocations")
    out: DeviceAllocations = {}
    for device_type, entries in doc.items():
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise _bad(key, text, f"{device_type}: want a list")
        allocations = []
        for e in entries:
            if not isinstance(e, Mapping) or isinstance(e.get("minor", 0), bool):
                raise _bad(key, text, f"{device_type}: want objects with a minor")
            minor = e.get("minor", 0)
            if not isinstance(minor, int):
                raise _bad(key, text, f"{device_type}: minor {minor!r} is not an integer")
            ext = e.get("extension") or {}
            if not isinstance(ext, Mapping):
                raise _bad(key, text, f"{device_type}: extension must be an object")
            vfs = tuple(
                VirtualFunction(int(v.get("minor") or 0), str(v.get("busID") or ""))
                for v in ext.get("vfs") or ()
                if isinstance(v, Mapping)
            )
            allocations.append(
                DeviceAllocation(
                    minor,
                    _resources(e.get("resources"), key, text),
                    str(e.get("id") or ""),
                    vfs,
                    str(ext.get("gpuSharedResourceTemplate") or ""),
                )
            )
        out[str(device_type)] = allocations
    return out


def format_quantity(name: str, value: int) -> str:
    """A device resource as Koordinator writes it: GPU memory as a BinarySI quantity (decimal below
    1024, as Go prints it), the rest as DecimalSI."""
    if name == RESOURCE_GPU_MEMORY and abs(value) >= 1024:
        return format_bytes(value)
    return format_decimal(value)


def format_device_allocations(allocations: Mapping[str, list[DeviceAllocation]]) -> str:
    """The annotation's value, byte for byte as Go's ``json.Marshal`` writes Koordinator's struct."""
    doc: dict[str, Any] = {}
    for device_type in sorted(allocations):
        entries = []
        for a in allocations[device_type]:
            entry: dict[str, Any] = {
                "minor": a.minor,
                "resources": {n: format_quantity(n, a.resources[n]) for n in sorted(a.resources)},
            }
            if a.id:
                entry["id"] = a.id
            ext: dict[str, Any] = {}
            if a.vfs:
                ext["vfs"] = [_vf(v) for v in a.vfs]
            if a.template:
                ext["gpuSharedResourceTemplate"] = a.template
            if ext:
                entry["extension"] = ext
            entries.append(entry)
        doc[device_type] = entries
    return json.dumps(doc, separators=(",", ":"))


def _vf(v: VirtualFunction) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v.minor:
        out["minor"] = v.minor
    if v.bus_id:
        out["busID"] = v.bus_id
    return out


@dataclass(frozen=True, slots=True)
class DeviceHint:
    """How a pod wants devices of one type picked."""

    selector: LabelSelector | None = None
    """Only devices whose labels match (``None``: any)."""
    vf_selector: LabelSelector | None = None
    """When set, a virtual function from a group matching it is allocated on each device."""
    allocate_strategy: str = ""
    required_topology_scope: str = ""
    exclusive_policy: str = ""


def _selector(raw: Any, key: str, text: str, device_type: str, what: str) -> LabelSelector | None:
    if raw is None:
        return None
    sel = parse_selector(raw)
    if sel.error or sel.nothing:
        raise _bad(key, text, f"invalid {what} of DeviceHint, deviceType: {device_type}, err: {sel.error}")
    return sel


def parse_allocate_hints(annotations: Mapping[str, Any]) -> dict[str, DeviceHint] | None:
    """The pod's hints by device type (``None``: not annotated)."""
    key = ANNOTATION_DEVICE_ALLOCATE_HINT
    found = _json(annotations, key)
    if found is None:
        return None
    doc, text = found
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise _bad(key, text, "want an object of device type -> hint")
    out = {}
    for device_type, h in doc.items():
        if h is None:
            continue
        if not isinstance(h, Mapping):
            raise _bad(key, text, f"{device_type}: want an object")
        out[str(device_type)] = DeviceHint(
            _selector(h.get("selector"), key, text, str(device_type), "Selector"),
            _selector(h.get("vfSelector"), key, text, str(device_type), "VFSelector"),
            str(h.get("allocateStrategy") or ""),
            str(h.get("requiredTopologyScope") or ""),
            str(h.get("exclusivePolicy") or ""),
        )
    return out


@dataclass(frozen=True, slots=True)
class DeviceJointAllocate:
    device_types: tuple[str, ...] = ()
    """The first is the primary type; the others are allocated on the PCIe switches of its devices."""
    required_scope: str = ""


def parse_joint_allocate(annotations: Mapping[str, Any]) -> DeviceJointAllocate | None:
    key = ANNOTATION_DEVICE_JOINT_ALLOCATE
    found = _json(annotations, key)
    if found is None:
        return None
    doc, text = found
    if doc is None:
        return DeviceJointAllocate()
    types = doc.get("deviceTypes") if isinstance(doc, Mapping) else None
    if not isinstance(doc, Mapping) or not isinstance(types or [], list):
        raise _bad(key, text, "want {deviceTypes: [...], requiredScope}")
    return DeviceJointAllocate(tuple(str(t) for t in types or ()), str(doc.get("requiredScope") or ""))


@dataclass(frozen=True, slots=True)
class GPUPartitionSpec:
    allocate_policy: str = PARTITION_BEST_EFFORT
    ring_bus_bandwidth: Fraction | None = None


def parse_gpu_partition_spec(annotations: Mapping[str, Any]) -> GPUPartitionSpec | None:
    key = ANNOTATION_GPU_PARTITION_SPEC
    found = _json(annotations, key)
    if found is None:
        return None
    doc, text = found
    if doc is None:
        return GPUPartitionSpec()
    if not isinstance(doc, Mapping):
        raise _bad(key, text, "want {allocatePolicy, ringBusBandwidth}")
    bandwidth = doc.get("ringBusBandwidth")
    try:
        parsed = None if bandwidth is None else parse_quantity(bandwidth)
    except InvalidValue as err:
        raise _bad(key, text, f"ringBusBandwidth {bandwidth!r} is not a quantity") from err
    return GPUPartitionSpec(str(doc.get("allocatePolicy") or PARTITION_BEST_EFFORT), parsed)
