"""The NodeResourceTopology the agent reports for the contract's simulated topology (2 sockets x 2 NUMA
nodes x 2 cores x 2 threads, written as sysfs by ``koordlet.testing.sysfs``), against expectations
written out by hand from Koordinator's rules (``states_noderesourcetopology.go``)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from koordlet import api
from koordlet.statesinformer.noderesourcetopology import NodeTopologyInformer, TopologyOptions
from koordlet.system.cgroups import CgroupMode
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import make_node, make_pod, pod_uid
from koordlet.testing.sysfs import write_topology
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.errors import APIUnavailable
from koordshared.testing.topology import TWO_SOCKETS, GiB, SimulatedTopology

STATUS = "scheduling.koordinator.sh/resource-status"


class Sink:
    def __init__(self) -> None:
        self.writes: list[tuple[bool, dict[str, Any]]] = []
        self.stored: dict[str, Any] | None = None

    def write_node_topology(self, body: Mapping[str, Any], *, create: bool) -> int:
        self.writes.append((create, dict(body)))
        self.stored = dict(body)
        return 201 if create else 200


def informer(
    tmp_path: Path,
    topo: SimulatedTopology = TWO_SOCKETS,
    *,
    node: api.NodeInfo | None = None,
    pods: tuple[api.PodInfo, ...] = (),
    configz: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
    sink: Sink | None = None,
    **options: Any,
) -> NodeTopologyInformer:
    paths = write_topology(tmp_path, topo)
    if checkpoint is not None:
        paths.kubelet_cpu_manager_state().write_text(json.dumps(checkpoint))
    host = Host(paths, mode=CgroupMode.V1, driver=CgroupDriver.CGROUPFS)
    conf = {"kubeletconfig": configz or {}}
    inf = NodeTopologyInformer(
        TopologyOptions("node-a", **options),
        host,
        lambda: node,
        lambda: pods,
        configz=lambda: conf,
        cached_object=lambda: sink.stored if sink is not None else None,
        node_uid=lambda: "11111111-2222-3333-4444-555555555555",
        sink=sink,
    )
    inf.refresh_host()
    inf.refresh_kubelet()
    return inf


def decoded_annotations(inf: NodeTopologyInformer) -> dict[str, Any]:
    status = inf.status()
    assert status is not None
    return {k: json.loads(v) for k, v in status.annotations.items()}


def test_plain_node(tmp_path: Path) -> None:
    inf = informer(tmp_path)
    status = inf.status()
    assert status is not None
    got = decoded_annotations(inf)
    detail = got[nrt.ANNOTATION_CPU_TOPOLOGY]["detail"]
    assert detail[:4] == [
        {"id": 0, "core": 0, "socket": 0, "node": 0},
        {"id": 1, "core": 1, "socket": 0, "node": 0},
        {"id": 2, "core": 2, "socket": 0, "node": 1},
        {"id": 3, "core": 3, "socket": 0, "node": 1},
    ]
    assert detail[4] == {"id": 4, "core": 4, "socket": 1, "node": 2}
    assert detail[8] == {"id": 8, "core": 0, "socket": 0, "node": 0}  # the sibling of CPU 0
    assert detail[15] == {"id": 15, "core": 7, "socket": 1, "node": 3}
    pools = [
        {"socket": 0, "node": 0, "cpuset": "0-1,8-9"},
        {"socket": 0, "node": 1, "cpuset": "2-3,10-11"},
        {"socket": 1, "node": 2, "cpuset": "4-5,12-13"},
        {"socket": 1, "node": 3, "cpuset": "6-7,14-15"},
    ]
    assert got[nrt.ANNOTATION_CPU_SHARED_POOLS] == pools
    assert got[nrt.ANNOTATION_BE_CPU_SHARED_POOLS] == pools
    assert got[nrt.ANNOTATION_POD_CPU_ALLOCS] is None
    assert got[nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY] == {"policy": "none"}
    assert got[nrt.ANNOTATION_CPU_BASIC_INFO] == {
        "cpuModel": TWO_SOCKETS.model,
        "hyperThreadEnabled": True,
        "turboEnabled": True,
        "vendorID": "GenuineIntel",
    }
    assert got[nrt.ANNOTATION_NODE_RESERVATION] == {}
    assert got[nrt.ANNOTATION_SYSTEM_QOS_RESOURCE] == {}
    assert status.topology_policy == "None"
    zone = {"capacity": "4", "allocatable": "4", "available": "4"}
    mem = {"capacity": "16Gi", "allocatable": "16Gi", "available": "16Gi"}
    zero = {"capacity": "0", "allocatable": "0", "available": "0"}
    assert [z.to_json() for z in status.zones] == [
        {
            "name": f"node-{n}",
            "type": "Node",
            "resources": [
                {"name": "cpu", **zone},
                {"name": "hugepages-1Gi", **zero},
                {"name": "hugepages-2Mi", **zero},
                {"name": "memory", **mem},
            ],
        }
        for n in range(4)
    ]
    # Go's json.Marshal bytes: compact, Koordinator's field order
    assert status.annotations[nrt.ANNOTATION_CPU_SHARED_POOLS].startswith(
        '[{"socket":0,"node":0,"cpuset":"0-1,8-9"}'
    )


def test_bound_pods_leave_the_pools(tmp_path: Path) -> None:
    lsr = make_pod("lsr", api.QOSClass.LSR, uid=pod_uid(1), annotations={STATUS: '{"cpuset":"0-1,8-9"}'})
    lse = make_pod("lse", api.QOSClass.LSE, uid=pod_uid(2), annotations={STATUS: '{"cpuset":"2,10"}'})
    done = make_pod(
        "done", api.QOSClass.LSE, uid=pod_uid(3), phase="Succeeded", annotations={STATUS: '{"cpuset":"4"}'}
    )
    got = decoded_annotations(informer(tmp_path, pods=(lsr, lse, done)))
    assert got[nrt.ANNOTATION_CPU_SHARED_POOLS] == [
        # every CPU of NUMA node 0 is bound: no pool there (koordlet drops bound CPUs before it forms
        # pools, and trims reserved ones after, which can leave a pool without CPUs: see below)
        {"socket": 0, "node": 1, "cpuset": "3,11"},
        {"socket": 1, "node": 2, "cpuset": "4-5,12-13"},  # a finished pod holds nothing
        {"socket": 1, "node": 3, "cpuset": "6-7,14-15"},
    ]
    # BE may share the LSR pod's CPUs, never the LSE pod's
    assert got[nrt.ANNOTATION_BE_CPU_SHARED_POOLS][:2] == [
        {"socket": 0, "node": 0, "cpuset": "0-1,8-9"},
        {"socket": 0, "node": 1, "cpuset": "3,11"},
    ]


def test_static_kubelet_reservations_and_system_qos(tmp_path: Path) -> None:
    web = make_pod("web", kube_qos=api.KubeQOSClass.GUARANTEED, uid=pod_uid(7))
    ls = make_pod("ls", api.QOSClass.LS, uid=pod_uid(8))
    node = make_node(
        16000,
        64 * GiB,
        annotations={
            nrt.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs":"15"}',
            nrt.ANNOTATION_SYSTEM_QOS_RESOURCE: '{"cpuset":"5"}',
        },
    )
    checkpoint = {
        "policyName": "static",
        "defaultCpuSet": "0-5,8-13",
        "entries": {pod_uid(7): {"main": "6-7,14"}, pod_uid(8): {"main": "13"}},
    }
    configz = {
        "cpuManagerPolicy": "static",
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
        "kubeReserved": {"cpu": "1"},
        "systemReserved": {"cpu": "500m"},
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
    }
    inf = informer(tmp_path, node=node, pods=(web, ls), configz=configz, checkpoint=checkpoint)
    got = decoded_annotations(inf)
    # ceil(1 + 0.5) = 2 CPUs, a whole core: CPU 0 and its sibling 8
    assert got[nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY] == {
        "policy": "static",
        "options": {"full-pcpus-only": "true"},
        "reservedCPUs": "0,8",
    }
    # the LS pod's entry is Koordinator's to manage, not the kubelet's
    assert got[nrt.ANNOTATION_POD_CPU_ALLOCS] == [
        {
            "namespace": "default",
            "name": "web",
            "uid": pod_uid(7),
            "cpuset": "6-7,14",
            "managedByKubelet": True,
        }
    ]
    assert got[nrt.ANNOTATION_CPU_SHARED_POOLS] == [
        {"socket": 0, "node": 0, "cpuset": "0-1,8-9"},  # kubelet-reserved CPUs stay shared
        {"socket": 0, "node": 1, "cpuset": "2-3,10-11"},
        {"socket": 1, "node": 2, "cpuset": "4,12-13"},  # 5 is exclusive to system QoS
        {"socket": 1, "node": 3},  # 6, 7, 14 the kubelet's, 15 reserved by the node
    ]
    assert got[nrt.ANNOTATION_NODE_RESERVATION] == {"reservedCPUs": "15"}
    status = inf.status()
    assert status is not None and status.topology_policy == "SingleNUMANodePodLevel"


def test_reservation_by_quantity_takes_whole_cores(tmp_path: Path) -> None:
    node = make_node(
        16000, 64 * GiB, annotations={nrt.ANNOTATION_NODE_RESERVATION: '{"resources":{"cpu":"1500m"}}'}
    )
    got = decoded_annotations(informer(tmp_path, node=node))
    assert got[nrt.ANNOTATION_NODE_RESERVATION] == {"resources": {"cpu": "1500m"}, "reservedCPUs": "0,8"}
    assert got[nrt.ANNOTATION_CPU_SHARED_POOLS][0] == {"socket": 0, "node": 0, "cpuset": "1,9"}


def test_hugepages_and_numa_reservation(tmp_path: Path) -> None:
    topo = dataclasses.replace(TWO_SOCKETS, hugepages_2m_per_numa=512, hugepages_1g_per_numa=2)
    node = make_node(
        16000,
        64 * GiB,
        cpu_allocatable_milli=15000,
        memory_allocatable_bytes=60 * GiB,
        labels={nrt.LABEL_ENABLE_NUMA_RESERVATION: "true"},
    )
    inf = informer(tmp_path, topo, node=node, hugepage_report=True)
    status = inf.status()
    assert status is not None
    zone = status.zones[0]
    rows = {r.name: (r.capacity, r.allocatable, r.available) for r in zone.resources}
    assert rows == {
        "cpu": ("4", "3750m", "3750m"),  # a quarter of the node's 1 CPU reserve
        "hugepages-1Gi": ("2Gi", "2Gi", "2Gi"),
        "hugepages-2Mi": ("1Gi", "1Gi", "1Gi"),
        "memory": ("13Gi", "12Gi", "12Gi"),  # 16Gi less 3Gi of huge pages, less a quarter of 4Gi
    }
    assert status.labels == {nrt.LABEL_ENABLE_NUMA_RESERVATION: "true"}


def test_sync_creates_once_then_updates_only_on_change(tmp_path: Path) -> None:
    sink = Sink()
    pods: list[api.PodInfo] = []
    inf = informer(tmp_path, sink=sink)
    inf._pods = lambda: tuple(pods)
    inf.sync()
    assert [c for c, _ in sink.writes] == [True]
    created = sink.writes[0][1]
    assert (
        created["apiVersion"] == "topology.node.k8s.io/v1alpha1" and created["kind"] == "NodeResourceTopology"
    )
    assert created["metadata"]["name"] == "node-a"
    assert created["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Koordinator"}
    assert created["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert created["topologyPolicies"] == ["None"] and len(created["zones"]) == 4
    inf.sync()
    assert len(sink.writes) == 1  # nothing changed
    # another component's resource in a zone survives the agent's updates
    assert sink.stored is not None
    sink.stored["zones"][0]["resources"].append(
        {"name": "example.com/fpga", "capacity": "1", "allocatable": "1", "available": "1"}
    )
    pods.append(make_pod("lsr", api.QOSClass.LSR, uid=pod_uid(1), annotations={STATUS: '{"cpuset":"0"}'}))
    inf.sync()
    assert [c for c, _ in sink.writes] == [True, False]
    updated = sink.writes[1][1]
    pools = json.loads(updated["metadata"]["annotations"][nrt.ANNOTATION_CPU_SHARED_POOLS])
    assert pools[0]["cpuset"] == "1,8-9"
    assert "example.com/fpga" in [r["name"] for r in updated["zones"][0]["resources"]]
    assert nrt.NodeTopologyStatus(nrt.zones_of(updated)).zones[0].resource("example.com/fpga") is not None


class UnreachableSink(Sink):
    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def write_node_topology(self, body: Mapping[str, Any], *, create: bool) -> int:
        if self.down:
            raise APIUnavailable("noderesourcetopology create: connection refused")
        return super().write_node_topology(body, create=create)


def test_an_api_server_outage_is_a_counted_warning_and_the_next_sync_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A write the API server cannot take is a fault the sync rides out: no exception out of the tick
    (which would log a traceback each round), one warning, and the write once it is back."""
    sink = UnreachableSink()
    inf = informer(tmp_path, sink=sink)
    with caplog.at_level(logging.DEBUG):
        inf.sync()
        inf.sync()
    assert inf.errors == 2 and sink.writes == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "unreachable" in r.getMessage()]
    assert len(warnings) == 1 and all(r.exc_info is None for r in caplog.records)
    sink.down = False
    inf.sync()
    assert [c for c, _ in sink.writes] == [True]


def test_reported_without_the_kubelets_configuration_when_it_refuses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = write_topology(tmp_path, TWO_SOCKETS)
    web = make_pod("web", kube_qos=api.KubeQOSClass.GUARANTEED, uid=pod_uid(7))
    checkpoint = {
        "policyName": "static",
        "defaultCpuSet": "0-5,8-15",
        "entries": {pod_uid(7): {"main": "6-7"}},
    }
    paths.kubelet_cpu_manager_state().write_text(json.dumps(checkpoint))
    host = Host(paths, mode=CgroupMode.V1, driver=CgroupDriver.CGROUPFS)
    answer: list[Any] = []

    def configz() -> Any:
        # the read-only port does not serve /configz; a kubelet may refuse it (401/403)
        if not answer:
            raise APIUnavailable("kubelet http://127.0.0.1:10255/configz: HTTP Error 404: Not Found")
        return answer[0]

    sink = Sink()
    inf = NodeTopologyInformer(
        TopologyOptions("node-a"),
        host,
        lambda: None,
        lambda: (web,),
        configz=configz,
        sink=sink,
        cached_object=lambda: sink.stored,
    )
    assert inf.status() is None, "unknown until the kubelet has been asked"
    with caplog.at_level(logging.DEBUG, logger="koordlet.statesinformer.noderesourcetopology"):
        for _ in range(3):
            inf.sync()
    assert [create for create, _ in sink.writes] == [True], "reported once, not held back"
    got = decoded_annotations(inf)
    # what the checkpoint says: the policy and the CPUs the kubelet gave the container
    assert got[nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY] == {"policy": "static"}
    assert [a["cpuset"] for a in got[nrt.ANNOTATION_POD_CPU_ALLOCS]] == ["6-7"]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "configz" in r.getMessage()]
    assert len(warned) == 1 and "404" in warned[0].getMessage(), "logged once, with the reason"
    # the kubelet answers: its configuration replaces the guess
    answer.append({"kubeletconfig": {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0,8"}})
    inf.sync()
    assert [create for create, _ in sink.writes] == [True, False]
    assert decoded_annotations(inf)[nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY]["reservedCPUs"] == "0,8"
    # --disable-query-kubelet-config: no policy, nothing of the kubelet's, but a status
    off = NodeTopologyInformer(
        TopologyOptions("node-a", query_kubelet_config=False), host, lambda: None, lambda: (), configz=configz
    )
    off.refresh_host()
    status = off.status()
    assert status is not None and status.annotations[nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY] == "{}"


@pytest.mark.parametrize(
    ("policy", "scope", "want"),
    [
        ("single-numa-node", "container", "SingleNUMANodeContainerLevel"),
        ("restricted", "pod", "RestrictedPodLevel"),
        ("best-effort", "pod", "BestEffortPodLevel"),
        ("none", "pod", "None"),
        ("restricted", "", "None"),
    ],
)
def test_topology_policies(policy: str, scope: str, want: str) -> None:
    assert nrt.topology_policy(policy, scope) == want


def test_an_unreadable_host_gives_no_status_and_no_error(tmp_path: Path) -> None:
    # no sysfs NUMA nodes and no /proc/meminfo: the host cannot say its memory
    (tmp_path / "sys").mkdir()
    paths = write_topology(tmp_path / "elsewhere", TWO_SOCKETS)
    bare = dataclasses.replace(paths, proc_root=tmp_path / "proc", sys_root=tmp_path / "sys")
    host = Host(bare, mode=CgroupMode.V1, driver=CgroupDriver.CGROUPFS)
    inf = NodeTopologyInformer(
        TopologyOptions("node-a", query_kubelet_config=False), host, lambda: None, lambda: ()
    )
    inf.refresh_host()
    inf.sync()
    assert inf.status() is None
    assert inf.document()["zones"] == []
