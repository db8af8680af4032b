"""DeviceShare's answers shared between nodes alike: a pod shape is worked out once over nodes whose
devices differ only in their ids, each pod still gets its own node's device ids, and nodes that differ
in anything an allocation reads (a GPU's health, what is taken, a GPU label of the node) are worked out
on their own."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.plugins.deviceshare.allocator import Allocator
from koord.scheduler.plugins.deviceshare.plugin import DeviceShare
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.deviceshare import ANNOTATION_DEVICE_ALLOCATED, parse_device_allocations
from koordshared.apis.scheduling import device as dv
from koordshared.testing import pod
from koordshared.testing.devices import device, device_node, gpu
from tests.support.counting import count_calls
from tests.support.scheduler.devicekit import S, annotation, kit

GPU1 = {dv.RESOURCE_NVIDIA_GPU: "1"}
HALF = {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY_RATIO: "50"}


def gpu_pod(name: str, requests: dict[str, str] = GPU1) -> dict[str, Any]:
    return pod(name, requests=dict(requests), scheduler_name=S, uid=f"uid-{name}")


def own_ids(name: str, *gpus: dict[str, Any]) -> dict[str, Any]:
    out = device(name, *gpus)
    for d in out["spec"]["devices"]:
        d["id"] = f"{name}-{d['id']}"
    return out


def nodes_kit(count: int) -> MemoryScheduler:
    k = kit()
    for i in range(count):
        k.add_node(device_node(f"n{i}", gpus=2))
        k.informers["devices"].put(own_ids(f"n{i}", gpu(0), gpu(1)))
    return k


def test_a_pod_shape_is_worked_out_once_over_nodes_alike_but_for_their_device_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = nodes_kit(12)
    allocations = count_calls(monkeypatch, Allocator, "allocate")
    scores = count_calls(monkeypatch, Allocator, "score")
    filters = count_calls(monkeypatch, DeviceShare, "filter")
    node_scores = count_calls(monkeypatch, DeviceShare, "score")
    k.add_pod(gpu_pod("whole"))
    k.add_pod(gpu_pod("half", HALF))
    k.run()
    # Filter and Score once a shape on the idle nodes, once more for the half GPU on the node the whole
    # one went to (it was 12 and 12 a shape); Reserve takes Filter's pick. The batches read the others
    # from the first idle node's answers without going through filter/score node by node.
    assert (allocations.n, scores.n, filters.n, node_scores.n) == (3, 3, 3, 3)
    assert len(k.bound()) == 2
    for key in ("default/whole", "default/half"):
        (alloc,) = (parse_device_allocations({ANNOTATION_DEVICE_ALLOCATED: annotation(k, key)}) or {})[dv.GPU]
        node = k.bound()[key]
        assert alloc.id == f"{node}-GPU-{alloc.minor}"  # the node's own GPU, not the first node's


def test_nodes_that_differ_in_what_an_allocation_reads_are_worked_out_on_their_own() -> None:
    k = kit()
    k.add_node(device_node("healthy", gpus=1))
    k.informers["devices"].put(device("healthy", gpu(0)))
    k.add_node(device_node("sick", gpus=1))
    k.informers["devices"].put(device("sick", gpu(0, healthy=False)))
    k.add_node(
        device_node("honor", gpus=1, labels={dv.LABEL_GPU_PARTITION_POLICY: dv.PARTITION_POLICY_HONOR})
    )
    k.informers["devices"].put(device("honor", gpu(0)))
    for i in range(3):
        k.add_pod(gpu_pod(f"p{i}"))
    k.run()
    # The healthy node and the one honouring partitions (no table for its model: it fits no whole GPU)
    # each take what they can; the sick one nothing.
    placed = {k.bound().get(f"default/p{i}") for i in range(3)}
    assert placed == {"healthy", None}
