"""DeviceShare's Filter, Score and allocation over real snapshots and Device objects (``pluginrun`` with a
handle): scores computed by hand from Koordinator's formulas (its own scoring cases), which nodes fail and
with which of Koordinator's messages, and which devices a pod gets: whole and shared GPUs by topology
scope, RDMA and FPGA by count, hints (selectors, ApplyForAll, RequestsAsCount, VFs), joint allocation on
one PCIe switch, NVIDIA Hopper partitions, required topology scopes."""

from __future__ import annotations

import json
from typing import Any

from koord.scheduler.framework import CycleState, PodInfo
from koord.scheduler.plugins.deviceshare.state import STATE_KEY
from koordshared.apis.extension.deviceshare import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
)
from koordshared.apis.scheduling import device as dv
from koordshared.testing import pod
from koordshared.testing.devices import device, device_node, fpga, gpu, rdma
from tests.support.scheduler.devicekit import GI, allocation, run

CORE, RATIO, MEM = dv.RESOURCE_GPU_CORE, dv.RESOURCE_GPU_MEMORY_RATIO, dv.RESOURCE_GPU_MEMORY
HALF = {CORE: "50", RATIO: "50"}


def holder(name: str, node: str, allocated: dict[str, Any]) -> dict[str, Any]:
    """A pod bound to ``node`` holding ``allocated`` (type -> [(minor, resources)]) by its annotation."""
    doc = {t: [{"minor": m, "resources": r} for m, r in allocs] for t, allocs in allocated.items()}
    return pod(name, node_name=node, annotations={ANNOTATION_DEVICE_ALLOCATED: json.dumps(doc)})


QUARTER_USED = {"gpu": [(0, {CORE: "25", RATIO: "25", MEM: "4Gi"})]}


def scoring_cluster(args: dict[str, Any] | None = None) -> Any:
    return run(
        [device_node("idle1", gpus=1), device_node("idle2", gpus=2), device_node("busy", gpus=1)],
        [device("idle1", gpu(0)), device("idle2", gpu(0), gpu(1)), device("busy", gpu(0))],
        [holder("quarter", "busy", QUARTER_USED)],
        args,
    )


def test_scores_least_allocated_by_hand() -> None:
    r = scoring_cluster()
    p = pod("p", requests=HALF)
    # idle1: ratio (100 - 50) / 100 -> 50, memory (nothing asked) -> 100: (50 + 100) // 2 = 75.
    # idle2: ratio over both GPUs (200 - 50) / 200 -> 75, memory 100: 87.
    # busy: ratio requested 25 + 50 of 100 -> 25; memory 4Gi of 16Gi requested -> 75: 50.
    assert r.scores(p, normalize=False) == {"idle1": 75, "idle2": 87, "busy": 50}
    # Normalised as kube-scheduler's DefaultNormalizeScore: the best becomes 100.
    assert r.scores(p) == {"idle1": 75 * 100 // 87, "idle2": 100, "busy": 50 * 100 // 87}
    # A pod asking for no device: PreFilter skips the plugin, PreScore too.
    assert r.scores(pod("cpu", requests={"cpu": "1"})) is None


def test_scores_most_allocated_by_hand() -> None:
    args = {
        "scoringStrategy": {
            "type": "MostAllocated",
            "resources": [{"name": RATIO, "weight": 1}, {"name": MEM, "weight": 1}],
        }
    }
    r = scoring_cluster(args)
    # idle1: ratio 50, memory 0 -> 25; idle2: ratio 25, memory 0 -> 12; busy: ratio 75, memory 25 -> 50.
    assert r.scores(pod("p", requests=HALF), normalize=False) == {"idle1": 25, "idle2": 12, "busy": 50}


def test_each_device_type_asked_for_adds_its_score() -> None:
    r = run([device_node("n", gpus=1, rdmas=1)], [device("n", gpu(0), rdma(0))])
    # gpu 75 as idle1 above; rdma (100 - 25) / 100 -> 75.
    assert r.scores(pod("p", requests={**HALF, dv.RESOURCE_RDMA: "25"}), normalize=False) == {"n": 150}


def test_which_nodes_fail_and_why() -> None:
    nodes = [
        device_node(name, gpus=1, rdmas=1)
        for name in ("plain", "no-gpu", "full", "full-no-topology", "sick", "ok")
    ]
    devices = [
        device("no-gpu", rdma(0)),
        device("full", gpu(0)),
        device("full-no-topology", gpu(0, numa=None)),
        device("sick", gpu(0, healthy=False)),
        device("ok", gpu(0)),
    ]
    whole = {"gpu": [(0, {CORE: "100", RATIO: "100", MEM: "16Gi"})]}
    r = run(nodes, devices, [holder("h1", "full", whole), holder("h2", "full-no-topology", whole)])
    assert r.reasons(pod("p", requests={dv.RESOURCE_NVIDIA_GPU: "1"})) == {
        "plain": "",  # no Device object: left to NodeResourcesFit and the kubelet, as in Koordinator
        "no-gpu": "unresolvable: Insufficient gpu devices",
        "full": "Insufficient GPU Devices",  # the topology allocator's words
        "full-no-topology": "Insufficient gpu devices",
        "sick": "Insufficient GPU Devices",
        "ok": "",
    }
    assert r.reasons(pod("two", requests={dv.RESOURCE_NVIDIA_GPU: "2"}))["ok"] == "Insufficient GPU Devices"
    assert r.reasons(pod("cpu", requests={"cpu": "1"})) == dict.fromkeys(r.reasons(pod("x")), "")


def test_a_pod_with_impossible_requests_or_annotations_is_unresolvable_everywhere() -> None:
    r = run([device_node("n", gpus=1)], [device("n", gpu(0))])
    st = r.pre_filter(pod("p", requests={CORE: "101"}))
    assert st.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE"
    assert st.message == "invalid resource device requests: [koordinator.sh/gpu-core]"
    bad_hint = pod("q", requests=HALF, annotations={ANNOTATION_DEVICE_ALLOCATE_HINT: "{oops"})
    assert "invalid DeviceAllocateHint annotation" in r.pre_filter(bad_hint).message


def four_gpus(*pods: dict[str, Any]) -> Any:
    """GPUs 0, 1 on NUMA node 0 behind pci0; 2, 3 on NUMA node 1 behind pci1."""
    gpus = [gpu(0), gpu(1), gpu(2, numa=1, pcie="pci1"), gpu(3, numa=1, pcie="pci1")]
    return run([device_node("n", gpus=4)], [device("n", *gpus)], pods)


def test_whole_gpus_go_to_the_narrowest_scope_that_has_them_preferring_busy_scopes() -> None:
    half_used = {"gpu": [(1, {CORE: "50", RATIO: "50", MEM: "8Gi"})]}
    r = four_gpus(holder("h", "n", half_used))
    full = {CORE: 100, RATIO: 100, MEM: 16 * GI}
    # Two whole GPUs: pci0 has only one free, so both come from pci1.
    assert allocation(r, pod("two", requests={dv.RESOURCE_NVIDIA_GPU: "2"}), "n") == {
        "gpu": [(2, full), (3, full)]
    }
    # One: the free GPU behind the busy pci0 (packing), not one of the idle pci1.
    assert allocation(r, pod("one", requests={dv.RESOURCE_NVIDIA_GPU: "1"}), "n") == {"gpu": [(0, full)]}


def test_a_shared_gpu_is_the_best_scored_one_in_the_busiest_scope() -> None:
    half_used = {"gpu": [(1, {CORE: "50", RATIO: "50", MEM: "8Gi"})]}
    r = four_gpus(holder("h", "n", half_used))
    quarter = {CORE: 25, RATIO: 25}
    # pci0 (busy) wins over pci1; inside it LeastAllocated scores GPU 0 (87) above GPU 1 (37).
    # The memory is filled from the ratio and the GPU's memory.
    assert allocation(r, pod("s", requests={CORE: "25", RATIO: "25"}), "n") == {
        "gpu": [(0, {**quarter, MEM: 4 * GI})]
    }
    most = run(
        [device_node("n", gpus=4)],
        [device("n", gpu(0), gpu(1), gpu(2, numa=1, pcie="pci1"), gpu(3, numa=1, pcie="pci1"))],
        [holder("h", "n", half_used)],
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": RATIO, "weight": 1}]}},
    )
    assert allocation(most, pod("s", requests={CORE: "25", RATIO: "25"}), "n") == {
        "gpu": [(1, {**quarter, MEM: 4 * GI})]
    }
    # A memory request gets its ratio filled in (8Gi of 16Gi: 50).
    assert allocation(r, pod("m", requests={CORE: "10", MEM: "8Gi"}), "n") == {
        "gpu": [(0, {CORE: 10, MEM: 8 * GI, RATIO: 50})]
    }


def test_rdma_and_fpga_by_count_score_and_minor() -> None:
    r = run(
        [device_node("n", rdmas=3, fpgas=2)],
        [device("n", rdma(0), rdma(1), rdma(2), fpga(0), fpga(1))],
        [holder("h", "n", {"rdma": [(1, {dv.RESOURCE_RDMA: "50"})]})],
    )
    full = {dv.RESOURCE_RDMA: 100}
    # 200: two whole NICs (not the half-used one); 50: the emptiest NICs score best, the lowest minor first.
    assert allocation(r, pod("two", requests={dv.RESOURCE_RDMA: "200"}), "n") == {
        "rdma": [(0, full), (2, full)]
    }
    assert allocation(r, pod("half", requests={dv.RESOURCE_RDMA: "50"}), "n") == {
        "rdma": [(0, {dv.RESOURCE_RDMA: 50})]
    }
    assert allocation(r, pod("f", requests={dv.RESOURCE_FPGA: "100"}), "n") == {
        "fpga": [(0, {dv.RESOURCE_FPGA: 100})]
    }
    assert allocation(r, pod("all", requests={dv.RESOURCE_RDMA: "400"}), "n") == "Insufficient rdma devices"


def hinted(name: str, requests: dict[str, str], hints: dict[str, Any], **annotations: str) -> dict[str, Any]:
    return pod(
        name,
        requests=requests,
        annotations={ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps(hints), **annotations},
    )


def test_hints_select_devices_and_strategies() -> None:
    nics = [
        rdma(0, labels={"net": "a"}),
        rdma(1, labels={"net": "b"}, vfs=2, vf_labels={"kind": "vf"}),
        rdma(2, labels={"net": "b"}),
    ]
    r = run([device_node("n", rdmas=3)], [device("n", *nics)])
    select_b = {"rdma": {"selector": {"matchLabels": {"net": "b"}}}}
    assert allocation(r, hinted("sel", {dv.RESOURCE_RDMA: "100"}, select_b), "n") == {
        "rdma": [(1, {dv.RESOURCE_RDMA: 100})]
    }
    # ApplyForAll: every device (matching the selector), whatever the request says.
    apply_all = {"rdma": {"allocateStrategy": "ApplyForAll", "selector": {"matchLabels": {"net": "b"}}}}
    got = allocation(r, hinted("all", {dv.RESOURCE_RDMA: "1"}, apply_all), "n")
    assert got == {"rdma": [(1, {dv.RESOURCE_RDMA: 1}), (2, {dv.RESOURCE_RDMA: 1})]}
    # RequestsAsCount with DeviceLevel exclusivity: the request is a number of whole devices.
    as_count = {"rdma": {"allocateStrategy": "RequestsAsCount", "exclusivePolicy": "DeviceLevel"}}
    got = allocation(r, hinted("count", {dv.RESOURCE_RDMA: "2"}, as_count), "n")
    assert got == {"rdma": [(0, {dv.RESOURCE_RDMA: 100}), (1, {dv.RESOURCE_RDMA: 100})]}


def reserved(r: Any, p: dict[str, Any], node: str) -> Any:
    """Reserve ``p`` on ``node`` and keep it (the allocation, as the cycle state holds it)."""
    state = CycleState(PodInfo(p))
    r.plugin.pre_filter(state, p)
    assert r.plugin.reserve(state, p, node) is None
    return state.read(STATE_KEY).result


def test_a_vf_selector_gets_a_virtual_function_and_nodes_without_vfs_are_unresolvable() -> None:
    nics = [rdma(0, vfs=2, vf_labels={"kind": "vf"})]
    r = run(
        [device_node("n", rdmas=1), device_node("novf", rdmas=1)],
        [device("n", *nics), device("novf", rdma(0))],
    )
    want_vf = {"rdma": {"vfSelector": {"matchLabels": {"kind": "vf"}}}}
    assert r.reasons(hinted("p", {dv.RESOURCE_RDMA: "1"}, want_vf)) == {
        "n": "",
        "novf": "unresolvable: Insufficient rdma VirtualFunctions",
    }
    (first,) = reserved(r, hinted("a", {dv.RESOURCE_RDMA: "1"}, want_vf), "n")["rdma"]
    (second,) = reserved(r, hinted("b", {dv.RESOURCE_RDMA: "1"}, want_vf), "n")["rdma"]
    # The lowest free bus id each time; both VFs taken, a third pod finds none.
    assert [v.bus_id for v in first.vfs + second.vfs] == ["0000:80:00.1", "0000:80:00.2"]
    assert allocation(r, hinted("c", {dv.RESOURCE_RDMA: "1"}, want_vf), "n") == "Insufficient rdma devices"


def test_joint_allocation_puts_the_nic_behind_the_gpus_pcie_switch() -> None:
    devices = [gpu(0), gpu(1, numa=1, pcie="pci1"), rdma(0), rdma(1, numa=1, pcie="pci1")]
    whole = {"gpu": [(0, {CORE: "100", RATIO: "100", MEM: "16Gi"})]}
    r = run([device_node("n", gpus=2, rdmas=2)], [device("n", *devices)], [holder("h", "n", whole)])
    joint = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})
    p = pod(
        "j",
        requests={dv.RESOURCE_NVIDIA_GPU: "1", dv.RESOURCE_RDMA: "1"},
        annotations={ANNOTATION_DEVICE_JOINT_ALLOCATE: joint},
    )
    got = allocation(r, p, "n")
    assert isinstance(got, dict) and [m for m, _ in got["gpu"]] == [1] and [m for m, _ in got["rdma"]] == [1]
    # Without the joint annotation the NIC is just the best-scored one (the lowest minor here).
    plain = pod("k", requests={dv.RESOURCE_NVIDIA_GPU: "1", dv.RESOURCE_RDMA: "1"})
    got = allocation(r, plain, "n")
    assert isinstance(got, dict) and [m for m, _ in got["rdma"]] == [0]


def test_hopper_partitions_when_the_node_honours_them() -> None:
    labels = {dv.LABEL_GPU_MODEL: "H100", dv.LABEL_GPU_PARTITION_POLICY: "Honor"}
    gpus = [gpu(m, "80Gi", numa=m // 4, pcie=f"pci{m // 2}") for m in range(8)]
    whole = {"gpu": [(0, {CORE: "100", RATIO: "100", MEM: "80Gi"})]}
    r = run(
        [device_node("n", gpus=8, gpu_memory="80Gi", labels=labels)],
        [device("n", *gpus)],
        [holder("h", "n", whole)],
    )
    # Pairs (2,3), (4,5), (6,7) are free; (2,3) leaves the quad 4-7 free: it is chosen.
    got = allocation(r, pod("two", requests={dv.RESOURCE_NVIDIA_GPU: "2"}), "n")
    assert isinstance(got, dict) and [m for m, _ in got["gpu"]] == [2, 3]
    # Three GPUs is no partition of the table: unresolvable on a node that honours partitions.
    assert (
        allocation(r, pod("three", requests={dv.RESOURCE_NVIDIA_GPU: "3"}), "n")
        == "node(s) Unsupported number of GPU requests"
    )


def test_a_required_topology_scope_is_enforced() -> None:
    spread = {
        "gpu": [(1, {CORE: "100", RATIO: "100", MEM: "16Gi"}), (3, {CORE: "100", RATIO: "100", MEM: "16Gi"})]
    }
    r = four_gpus(holder("h", "n", spread))
    need_pcie = {"gpu": {"requiredTopologyScope": "PCIe"}}
    p = hinted("p", {dv.RESOURCE_NVIDIA_GPU: "2"}, need_pcie)
    assert r.reasons(p) == {"n": "Insufficient Topology Scoped GPU Devices"}
    # Without the scope, GPUs 0 and 2 (one per switch) will do.
    got = allocation(r, pod("q", requests={dv.RESOURCE_NVIDIA_GPU: "2"}), "n")
    assert isinstance(got, dict) and [m for m, _ in got["gpu"]] == [0, 2]


def test_gpu_share_is_refused_on_unsupported_models_and_other_isolation_providers() -> None:
    labels = {dv.LABEL_GPU_VENDOR: "huawei", dv.LABEL_GPU_MODEL: "Ascend-310P3-300I-DUO"}
    nodes = [
        device_node("ascend", gpus=1, labels=labels),
        device_node("hami", gpus=1, labels={dv.LABEL_GPU_ISOLATION_PROVIDER: "HAMi-core"}),
    ]
    args = {"gpuShareUnsupportedModels": [{"vendor": "huawei", "model": "Ascend-310P3-300I-DUO"}]}
    r = run(nodes, [device("ascend", gpu(0)), device("hami", gpu(0))], args=args)
    assert r.reasons(pod("s", requests=HALF)) == {
        "ascend": 'unresolvable: model "Ascend-310P3-300I-DUO" of vendor "huawei" does not support GPU Share',
        "hami": "",
    }
    other = pod("o", requests=HALF, labels={dv.LABEL_GPU_ISOLATION_PROVIDER: "other"})
    assert r.reasons(other)["hami"] == "unresolvable: GPUIsolationProviderHAMICore not found on the node"
    assert r.reasons(pod("w", requests={dv.RESOURCE_NVIDIA_GPU: "1"})) == {
        "ascend": "",
        "hami": "",
    }  # whole GPUs


NPU_SHARE = {
    dv.RESOURCE_GPU_SHARED: "1",
    dv.RESOURCE_HUAWEI_NPU_CORE: "10",
    dv.RESOURCE_HUAWEI_NPU_CPU: "3",
    MEM: "16Gi",
}


def templates_config_map(data: str) -> dict[str, Any]:
    meta = {"name": "gpu-shared-resource-templates", "namespace": "koordinator-system"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"data.yaml": data}}


def test_npu_shares_must_match_a_template_of_the_nodes_model() -> None:
    labels = {dv.LABEL_GPU_VENDOR: "huawei", dv.LABEL_GPU_MODEL: "Ascend-910B"}
    nodes = [device_node("ascend", gpus=1, labels=labels), device_node("other", gpus=1)]
    devices = [device("ascend", gpu(0, "64Gi")), device("other", gpu(0, "64Gi"))]
    r = run(nodes, devices)
    # No template loaded: Koordinator's answer for every node.
    st = r.pre_filter(pod("npu", requests=NPU_SHARE))
    assert (
        st.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE"
        and st.message == "no matched GPU shared resource template"
    )
    data = (
        "huawei-Ascend-910B:\n"
        "  vir10_3c_16g: {huawei.com/npu-core: '10', huawei.com/npu-cpu: '3',\n"
        "                 koordinator.sh/gpu-memory: 16Gi}\n"
        "  vir05_1c_8g: {huawei.com/npu-core: '5', huawei.com/npu-cpu: '1', koordinator.sh/gpu-memory: 8Gi}\n"
    )
    store = r.handle.informers["configmaps/koordinator-system/gpu-shared-resource-templates"]
    store.put(templates_config_map(data))
    assert r.reasons(pod("npu", requests=NPU_SHARE)) == {
        "ascend": "",
        "other": "unresolvable: no matched GPU shared resource template",
    }
    state = CycleState(PodInfo(pod("npu", requests=NPU_SHARE)))
    r.plugin.pre_filter(state, pod("npu", requests=NPU_SHARE))
    assert r.plugin.reserve(state, pod("npu", requests=NPU_SHARE), "ascend") is None
    (alloc,) = state.read(STATE_KEY).result["gpu"]
    assert alloc.template == "vir10_3c_16g"
    # A ConfigMap that does not parse keeps the templates read before; its deletion drops them.
    store.put(templates_config_map("- not a map"))
    assert r.pre_filter(pod("again", requests=NPU_SHARE)) is None
    store.remove("koordinator-system/gpu-shared-resource-templates")
    assert r.pre_filter(pod("gone", requests=NPU_SHARE)).message == "no matched GPU shared resource template"
