"""Generate the Device CustomResourceDefinition (``scheduling.koordinator.sh/v1alpha1``) that
koord-scheduler's DeviceShare plugin reads.

The YAML file next to this script is its output; edit the schema here and run
``python deploy/scheduler/crds/gen_device_crd.py`` (``--check`` exits 1 when the file is out of date, as the
unit tests do). The schema pieces are the agent's CRD generator's (``deploy/daemonset/crds/schema_parts.py``).

The shape is Koordinator's (``apis/scheduling/v1alpha1/device_types.go``): cluster-scoped, one object per
node named after it, ``spec.devices`` (type, id, minor, moduleID, health, resources, topology, labels,
virtual-function groups, conditions) and ``status.allocations``, no status subresource. Constraints are no
stricter than Koordinator's, so every Device a Koordinator cluster holds is accepted. The GPU partition
table rides in the annotation ``scheduling.koordinator.sh/gpu-partitions``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "daemonset" / "crds"))

from schema_parts import Schema, array, boolean, generate, integer, obj, quantity, string  # noqa: E402

GROUP = "scheduling.koordinator.sh"
VERSION = "v1alpha1"
FILE = f"{GROUP}_devices.yaml"


def labels(description: str) -> Schema:
    return {"type": "object", "description": description, "additionalProperties": {"type": "string"}}


def condition() -> Schema:
    return obj(
        {
            "type": string("The condition's type (Healthy)."),
            "status": string("True, False or Unknown."),
            "observedGeneration": integer("int64", 0),
            "lastTransitionTime": string("When the status last changed.", format="date-time"),
            "reason": string("Why, in CamelCase."),
            "message": string("Why, for humans."),
        },
        "One aspect of the device's state.",
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )


def device_info() -> Schema:
    topology = obj(
        {
            "socketID": integer("int32", description="The CPU socket the device is attached to."),
            "nodeID": integer("int32", description="The NUMA node the device belongs to (-1: unknown)."),
            "pcieID": string("The PCIe switch the device is behind."),
            "busID": string("The device's PCI address, domain:bus:device.function."),
        },
        "Where the device sits; DeviceShare places GPUs and NICs by it.",
        required=["nodeID", "pcieID", "socketID"],
    )
    vf = obj(
        {
            "minor": integer("int32", description="The virtual function's number."),
            "busID": string("Its PCI address."),
        },
        required=["minor"],
    )
    vf_group = obj(
        {"labels": labels("Properties of the group, matched by a pod's VF selector."), "vfs": array(vf)},
        "Virtual functions of the device (SR-IOV).",
    )
    return obj(
        {
            "type": string("gpu, rdma or fpga."),
            "id": string("The device's identifier (a GPU's UUID, a NIC's PCI address)."),
            "minor": integer("int32", description="The device's minor number, from 0."),
            "moduleID": integer("int32", description="The device's physical id."),
            "health": {**boolean("Whether the device may be allocated."), "default": False},
            "resources": {
                "type": "object",
                "description": "What the device has (koordinator.sh/gpu-core 100, gpu-memory, rdma 100...).",
                "additionalProperties": quantity(),
            },
            "labels": labels("Properties of the device, matched by a pod's device selector."),
            "topology": topology,
            "vfGroups": array(vf_group),
            "conditions": array(condition()),
        },
        "One device of the node.",
        required=["health"],
    )


def device_schema() -> Schema:
    entry = obj(
        {
            "name": string(),
            "namespace": string(),
            "uuid": string(),
            "minors": array(integer("int32")),
        }
    )
    status = obj(
        {"allocations": array(obj({"type": string(), "entries": array(entry)}))},
        "What the node agent reports allocated.",
    )
    return obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": obj({"devices": array(device_info())}, "The node's devices."),
            "status": status,
        },
        "Device: the GPUs, RDMA NICs and FPGAs of the node of the same name (reported by the node agent).",
    )


def crd() -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"devices.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Device", "listKind": "DeviceList", "plural": "devices", "singular": "device"},
            "scope": "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": device_schema()},
                }
            ],
        },
    }


def main(argv: list[str]) -> int:
    return generate(HERE, "gen_device_crd.py", {FILE: crd()}, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
