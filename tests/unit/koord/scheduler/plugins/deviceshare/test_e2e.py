"""DeviceShare end to end in MemoryScheduler (real queue, cycles, DefaultPreBind's merged PATCH): the
allocation annotation written once per pod, pods waiting for devices and requeued when one is freed or a
Device changes, a restarted scheduler rebuilding what is taken from the pods' annotations, Unreserve giving
devices back, preemption freeing a victim's GPU, and a designated allocation kept under a scheduling hint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from koord.scheduler.framework import CodedVerdicts, CycleState, Obj, PodInfo, Status
from koord.scheduler.plugins.deviceshare import cache as cache_module
from koord.scheduler.plugins.deviceshare import gpuallocator
from koord.scheduler.plugins.deviceshare.allocator import Allocator
from koord.scheduler.plugins.deviceshare.state import STATE_KEY
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.deviceshare import (
    ANNOTATION_DEVICE_ALLOCATED,
    DeviceAllocation,
    format_device_allocations,
    parse_device_allocations,
)
from koordshared.apis.extension.schedulinghint import ANNOTATION_SCHEDULING_HINT
from koordshared.apis.scheduling import device as dv
from koordshared.testing import pod
from koordshared.testing.devices import device, device_node, gpu
from tests.support.counting import count_calls
from tests.support.scheduler.devicekit import S, annotation, kit, profile

GPU1 = {dv.RESOURCE_NVIDIA_GPU: "1"}


def gpu_pod(name: str, requests: Mapping[str, str] = GPU1, **kw: Any) -> dict[str, Any]:
    return pod(name, requests=dict(requests), scheduler_name=S, uid=f"uid-{name}", **kw)


def minors(text: str, device_type: str = dv.GPU) -> list[int]:
    allocations = parse_device_allocations({ANNOTATION_DEVICE_ALLOCATED: text}) or {}
    return [a.minor for a in allocations.get(device_type, [])]


def two_gpu_kit(**kw: Any) -> MemoryScheduler:
    k = kit(**kw)
    k.add_node(device_node("n", gpus=2))
    k.informers["devices"].put(device("n", gpu(0), gpu(1)))
    return k


def plugin(k: MemoryScheduler) -> Any:
    return k.scheduler.profiles[S].instances["DeviceShare"]


def test_gpu_pods_get_their_devices_in_one_patch_and_wait_when_none_is_left() -> None:
    k = two_gpu_kit()
    for name in ("a", "b", "c"):
        k.add_pod(gpu_pod(name))
    k.run()
    assert k.bound() == {"default/a": "n", "default/b": "n"}
    assert sorted(minors(annotation(k, "default/a")) + minors(annotation(k, "default/b"))) == [0, 1]
    # One PATCH per pod, with the annotation and the Device's ids (DefaultPreBind merges PreBind's changes).
    (patch,) = k.api.patches["default/a"]
    text = patch["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED]
    assert json.loads(text)["gpu"][0]["id"] == f"GPU-{minors(text)[0]}"
    (failed,) = k.events("FailedScheduling")
    # NodeResourcesFit, ahead of DeviceShare at Filter, sees the node's nvidia.com/gpu all requested.
    assert failed[0] == "default/c" and "1 Insufficient nvidia.com/gpu" in failed[3]
    # Deleting a holder frees its GPU: the Pod/Delete event brings c back and it gets that GPU.
    freed = minors(annotation(k, "default/a"))
    k.delete_pod("default", "a")
    k.clock.advance(2)  # past the pod's backoff
    k.run()
    assert k.bound()["default/c"] == "n" and minors(annotation(k, "default/c")) == freed


def test_a_restarted_scheduler_rebuilds_what_is_taken_from_the_annotations() -> None:
    k = two_gpu_kit()
    k.add_pod(gpu_pod("a"))
    k.run()
    held = annotation(k, "default/a")
    bound_a = {
        **gpu_pod("a", annotations={ANNOTATION_DEVICE_ALLOCATED: held}),
        "spec": {**gpu_pod("a")["spec"], "nodeName": "n"},
    }

    again = two_gpu_kit()
    again.add_pod(bound_a)
    shared = gpu_pod("s", {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY_RATIO: "50"})
    again.add_pod(shared)
    again.add_pod(gpu_pod("b"))
    again.run()
    # The other GPU goes to b or s; the one a holds is never handed out again.
    taken = [minors(annotation(again, key)) for key in ("default/b", "default/s") if key in again.bound()]
    assert minors(held)[0] not in [m for ms in taken for m in ms]
    summary = plugin(again).debug_node("n")
    assert "default/a" in summary["allocateSet"]["gpu"]


def test_devices_follow_their_device_object() -> None:
    k = kit()
    k.add_node(device_node("n", gpus=1))
    k.add_pod(gpu_pod("early"))
    k.run()
    # No Device yet: the node is NodeResourcesFit's alone, the pod binds without an allocation.
    assert k.bound() == {"default/early": "n"} and annotation(k, "default/early") == ""

    k2 = kit()
    k2.add_node(device_node("n", gpus=1))
    k2.informers["devices"].put(device("n", gpu(0, healthy=False)))
    k2.add_pod(gpu_pod("p"))
    k2.run()
    assert "default/p" not in k2.bound()
    # The device agent reports the GPU healthy again: the Device update requeues the pod.
    k2.informers["devices"].put(device("n", gpu(0)))
    k2.clock.advance(2)
    k2.run()
    assert k2.bound() == {"default/p": "n"} and minors(annotation(k2, "default/p")) == [0]
    # A deleted Device leaves the node's GPUs unusable, not free to give twice.
    k2.informers["devices"].remove("n")
    k2.delete_pod("default", "p")
    k2.add_pod(gpu_pod("q"))
    k2.run()
    assert "default/q" not in k2.bound()


def test_pods_of_one_shape_see_each_allocation_before_them() -> None:
    # DeviceShare remembers a verdict per pod shape and node: each allocation must make it stale. The node
    # lists four GPUs but its Device one, so DeviceShare (not NodeResourcesFit) is the one to refuse.
    k = kit()
    k.add_node(device_node("n", gpus=4))
    k.informers["devices"].put(device("n", gpu(0)))
    half = {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY_RATIO: "50"}
    for name in ("a", "b", "c"):
        k.add_pod(gpu_pod(name, half))
    k.run()
    assert set(k.bound()) == {"default/a", "default/b"}
    (failed,) = k.events("FailedScheduling")
    assert failed[0] == "default/c" and "1 Insufficient GPU Devices" in failed[3]
    # A second GPU in the Device: the same shape fits again.
    k.informers["devices"].put(device("n", gpu(0), gpu(1)))
    k.clock.advance(2)
    k.run()
    assert k.bound()["default/c"] == "n" and minors(annotation(k, "default/c")) == [1]


class RejectAtPermit:
    name = "RejectAtPermit"

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        pass

    def permit(self, state: CycleState, p: Obj, node_name: str) -> tuple[Status | None, float]:
        return Status.unschedulable("not now"), 0.0


def test_unreserve_gives_the_devices_back() -> None:
    prof = profile()
    prof["plugins"]["permit"] = {"enabled": [{"name": "RejectAtPermit"}]}
    k = MemoryScheduler({"profiles": [prof]}, plugins={"RejectAtPermit": RejectAtPermit})
    k.add_node(device_node("n", gpus=2))
    k.informers["devices"].put(device("n", gpu(0), gpu(1)))
    k.add_pod(gpu_pod("p", {dv.RESOURCE_NVIDIA_GPU: "2"}))
    k.run()
    assert k.bound() == {} and "default/p" not in k.api.patches
    summary = plugin(k).debug_node("n")
    assert summary["allocateSet"]["gpu"] == {} and summary["deviceUsed"] == {}


def test_preemption_frees_the_victims_gpu() -> None:
    k = kit()
    k.add_node(device_node("n", gpus=1))
    k.informers["devices"].put(device("n", gpu(0)))
    k.add_pod(gpu_pod("low", priority=1))
    k.run()
    assert k.bound() == {"default/low": "n"}
    k.add_pod(gpu_pod("high", priority=1000))
    k.run()
    # The GPU held by the low-priority pod counts as free in preemption's what-if: it is the victim.
    assert k.api.deleted == ["default/low"]
    k.delete_pod("default", "low")
    k.clock.advance(2)
    k.run()
    assert k.bound()["default/high"] == "n" and minors(annotation(k, "default/high")) == [0]


def test_a_designated_allocation_is_kept_only_under_a_scheduling_hint_naming_deviceshare() -> None:
    designated = json.dumps(
        {
            "gpu": [
                {"minor": 1, "resources": {dv.RESOURCE_GPU_CORE: "100", dv.RESOURCE_GPU_MEMORY_RATIO: "100"}}
            ]
        }
    )
    hint = json.dumps({"extensions": {"DeviceShare": {}}})
    k = two_gpu_kit(hint=True)
    k.add_pod(
        gpu_pod(
            "kept", annotations={ANNOTATION_DEVICE_ALLOCATED: designated, ANNOTATION_SCHEDULING_HINT: hint}
        )
    )
    k.run()
    assert minors(annotation(k, "default/kept")) == [1]
    k = two_gpu_kit(hint=True)
    k.add_pod(gpu_pod("recomputed", annotations={ANNOTATION_DEVICE_ALLOCATED: designated}))
    k.run()
    assert minors(annotation(k, "default/recomputed")) == [0]
    # The designated GPU taken: the hinted pod does not fit anywhere else.
    k.add_pod(
        gpu_pod(
            "blocked",
            annotations={
                ANNOTATION_DEVICE_ALLOCATED: json.dumps(
                    {
                        "gpu": [
                            {
                                "minor": 0,
                                "resources": {
                                    dv.RESOURCE_GPU_CORE: "100",
                                    dv.RESOURCE_GPU_MEMORY_RATIO: "100",
                                },
                            }
                        ]
                    }
                ),
                ANNOTATION_SCHEDULING_HINT: hint,
            },
        )
    )
    k.run()
    assert "default/blocked" not in k.bound()


def test_a_cycle_works_out_only_the_nodes_whose_devices_changed() -> None:
    # The other cycles' answers are kept: a stale one is what test_devices_follow_their_device_object and
    # test_pods_of_one_shape_see_each_allocation_before_them catch.
    k = kit()
    names = [f"n{i}" for i in range(12)]
    for name in names:
        k.add_node(device_node(name, gpus=2))
        k.informers["devices"].put(device(name, gpu(0), gpu(1)))
    answers = plugin(k).answers
    k.add_pod(gpu_pod("first"))
    k.run()
    assert answers.computed == 2 * len(names)  # Filter and Score on every node
    for i in range(4):
        answers.computed = 0
        k.add_pod(gpu_pod(f"p{i}"))
        k.run()
        # Only the node the previous pod went to is not read from the arrays (it was 2 x 12 a cycle).
        assert answers.computed == 2, i


def test_answers_kept_past_the_change_log_are_all_worked_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cycle that comes after more changes than the cache remembers reads every node's version again.
    monkeypatch.setattr(cache_module, "LOG_SIZE", 1)
    test_pods_of_one_shape_see_each_allocation_before_them()


def test_prebind_reads_a_device_object_once_and_a_new_one_again(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = count_calls(monkeypatch, dv, "device_ids")
    k = kit()
    k.add_node(device_node("n", gpus=4))
    k.informers["devices"].put(device("n", *(gpu(m) for m in range(4))))
    reads.n = 0
    for name in ("a", "b", "c"):
        k.add_pod(gpu_pod(name))
    k.run()
    assert len(k.bound()) == 3 and reads.n == 1  # it was one a pod
    # A new Device object (a GPU's id changed): its ids are read again and written.
    renamed = device("n", *(gpu(m) for m in range(4)))
    for d in renamed["spec"]["devices"]:
        d["id"] = f"new-{d['id']}"
    k.informers["devices"].put(renamed)
    k.add_pod(gpu_pod("d"))
    k.run()
    assert "new-GPU-" in annotation(k, "default/d")


HALF = {dv.RESOURCE_GPU_CORE: "50", dv.RESOURCE_GPU_MEMORY_RATIO: "50"}


def twelve_node_kit() -> MemoryScheduler:
    k = kit()
    for i in range(12):
        k.add_node(device_node(f"n{i}", gpus=2))
        k.informers["devices"].put(device(f"n{i}", gpu(0), gpu(1)))
    k.cache.update_snapshot(k.snapshot)
    return k


def test_a_pod_after_one_node_changed_allocates_only_on_that_node_and_reserve_takes_filters_pick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = twelve_node_kit()
    k.add_pod(gpu_pod("first"))
    k.run()
    allocations = count_calls(monkeypatch, Allocator, "allocate")
    for i in range(4):
        allocations.n = 0
        k.add_pod(gpu_pod(f"p{i}"))
        k.run()
        # Filter on the node the previous pod went to; Reserve, on a node Filter saw as it is, takes the
        # allocation Filter worked out there (it was one more allocation a pod). The nodes the later pods
        # went to are alike (one GPU taken): the first one's answers serve them (it was one a pod).
        assert allocations.n == (1 if i == 0 else 0), i
    assert len(k.bound()) == 5


def test_reserve_on_a_node_that_changed_since_filter_allocates_again(monkeypatch: pytest.MonkeyPatch) -> None:
    k = two_gpu_kit()
    k.add_pod(gpu_pod("a"))
    k.run()
    p = plugin(k)
    b = gpu_pod("b")
    state = CycleState(PodInfo(b))
    assert p.pre_filter(state, b) is None
    info = k.snapshot.node_info("n")
    assert p.filter(state, b, info) is None
    taken = minors(annotation(k, "default/a"))
    p.cache.count("n", {dv.GPU: [DeviceAllocation(1 - taken[0], {dv.RESOURCE_GPU_CORE: 0})]}, "default/x")
    allocations = count_calls(monkeypatch, Allocator, "allocate")
    assert p.reserve(state, b, "n") is None
    assert allocations.n == 1


def test_prebind_parses_none_of_the_devices_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    k = twelve_node_kit()
    parsed = count_calls(monkeypatch, dv, "resource_values")
    for name in ("a", "b", "c"):
        k.add_pod(gpu_pod(name))
    k.run()
    # PreBind reads each node's Device ids once; their resources are the cache's, parsed when it came.
    assert len(k.bound()) == 3 and parsed.n == 0


def test_binding_a_pod_does_not_read_back_the_allocation_prebind_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k = two_gpu_kit()
    parsed = count_calls(monkeypatch, cache_module, "parse_device_allocations")
    k.add_pod(gpu_pod("a"))
    k.run()
    # The bound pod's annotation is what PreBind wrote for what Reserve counted: nothing to read (it was
    # 1; 2 when the pod before binding was read too).
    assert k.bound() == {"default/a": "n"} and parsed.n == 0
    assert minors(annotation(k, "default/a")) == [0]


def test_a_bound_pod_whose_written_allocation_was_released_is_read_and_counted() -> None:
    c = cache_module.DeviceCache()
    c.device_changed(device("n", gpu(0), gpu(1)))
    held = {dv.GPU: [DeviceAllocation(1, {dv.RESOURCE_GPU_CORE: 100, dv.RESOURCE_GPU_MEMORY_RATIO: 100})]}
    c.count("n", held, "default/a")
    text = format_device_allocations(held)
    c.written("default/a", "n", text)
    c.release("default/a")  # Unreserve after PreBind
    bound = gpu_pod("a", annotations={ANNOTATION_DEVICE_ALLOCATED: text})
    bound["spec"]["nodeName"] = "n"
    c.pod_updated(gpu_pod("a"), bound)
    nd = c.get("n")
    assert nd is not None and nd.held_by("default/a") == {dv.GPU: {1: dict(held[dv.GPU][0].resources)}}


def test_batch_filter_answers_one_status_per_distinct_reason() -> None:
    k = twelve_node_kit()
    p = plugin(k)
    for i in range(12):
        held = [
            DeviceAllocation(m, {dv.RESOURCE_GPU_CORE: 100, dv.RESOURCE_GPU_MEMORY_RATIO: 100})
            for m in (0, 1)
        ]
        if i % 3:
            p.cache.count(f"n{i}", {dv.GPU: held}, f"default/holder-{i}")
    b = gpu_pod("b")
    state = CycleState(PodInfo(b))
    assert p.pre_filter(state, b) is None
    verdicts = p.filter_nodes(state, b, k.snapshot.rotated(0))
    # Eight full nodes, one reason: one code for them all, not a Status per node for the cycle to sort.
    assert isinstance(verdicts, CodedVerdicts) and len(verdicts.statuses) == 2
    failing = [v for v in verdicts if v is not None]
    assert len(failing) == 8 and {v.message for v in failing} == {gpuallocator.INSUFFICIENT_GPUS}


def test_the_gpus_availability_is_worked_out_once_per_node_version(monkeypatch: pytest.MonkeyPatch) -> None:
    k = two_gpu_kit()
    k.cache.update_snapshot(k.snapshot)
    p = plugin(k)
    info = k.snapshot.node_info("n")
    assert info is not None
    nd, node = p.cache.get("n"), info.node
    hashed = count_calls(monkeypatch, gpuallocator, "hash_minors")
    for name, requests in (("whole", GPU1), ("half", HALF)):
        state = CycleState(PodInfo(gpu_pod(name, requests)))
        assert p.pre_filter(state, gpu_pod(name, requests)) is None
        with nd.lock:
            Allocator(state.read(STATE_KEY), nd, node, p.scorer).allocate()
    assert hashed.n == 1
