"""The Device CRD (deploy/scheduler/crds): generated from its script, Koordinator's shape (cluster-scoped,
no status subresource), and it accepts the Devices the node agent writes (GPUs with topology, NICs with
virtual functions, the partition-table annotation), refusing wrong types."""

from __future__ import annotations

import json

import yaml

from koordshared.apis.scheduling.device import ANNOTATION_GPU_PARTITIONS
from koordshared.testing.devices import device, fpga, gpu, rdma
from tests import crdschema
from tests.support.paths import ROOT

CRDS = ROOT / "deploy" / "scheduler" / "crds"
CRD = CRDS / "scheduling.koordinator.sh_devices.yaml"


def test_koordinators_shape() -> None:
    doc = yaml.safe_load(CRD.read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "devices.scheduling.koordinator.sh"
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "scheduling.koordinator.sh",
        "Cluster",
        "Device",
    )
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and "subresources" not in version


def test_what_the_node_agent_writes_is_valid_and_wrong_types_are_not() -> None:
    table = {"2": [{"minors": [0, 1], "gpuLinkType": "NVLink", "allocationScore": 1}]}
    good = device(
        "n1",
        gpu(0),
        gpu(1, numa=1, pcie="pci1", healthy=False),
        rdma(0, vfs=2, vf_labels={"type": "fast"}),
        fpga(0),
        annotations={ANNOTATION_GPU_PARTITIONS: json.dumps(table)},
    )
    good["status"] = {
        "allocations": [{"type": "gpu", "entries": [{"name": "p", "namespace": "d", "minors": [0]}]}]
    }
    assert crdschema.errors(good, CRD) == []
    bad = device("n1", {**gpu(0), "resources": {"koordinator.sh/gpu-core": "lots"}})
    assert crdschema.errors(bad, CRD) != []
    assert crdschema.errors(device("n1", {**gpu(0), "minor": "zero"}), CRD) != []
