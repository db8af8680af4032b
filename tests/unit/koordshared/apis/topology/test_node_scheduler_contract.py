"""The node-scheduler contract's shapes (``koordshared/apis/extension/numa.py``, ``nrt.py``,
``noderesourcetopology.py``): what Koordinator's Go structs marshal to, read back the same, and malformed
input refused as InvalidValue."""

from __future__ import annotations

import pytest

from koordshared.apis.extension import numa
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.errors import InvalidValue


def test_resource_status_round_trip_and_go_bytes() -> None:
    status = numa.ResourceStatus("0-3,8", (numa.NUMANodeResource(0, {"cpu": "4", "memory": "8Gi"}),))
    text = status.annotation()
    assert (
        text == '{"cpuset":"0-3,8","numaNodeResources":[{"node":0,"resources":{"cpu":"4","memory":"8Gi"}}]}'
    )
    assert numa.resource_status({numa.ANNOTATION_RESOURCE_STATUS: text}) == status
    assert numa.resource_status({}) == numa.ResourceStatus()
    assert numa.ResourceStatus().annotation() == "{}"
    # canonical cpu lists; CPUs per NUMA node only where the pod got CPU
    got = numa.resource_status(
        {
            numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"3,0-2","numaNodeResources":[{"node":1,"resources":'
            '{"cpu":"0"}},{"node":2,"resources":{"kubernetes.io/batch-cpu":"2000"}}]}'
        }
    )
    assert got.cpuset == "0-3" and got.cpus == {0, 1, 2, 3} and got.numa_nodes_with_cpu() == (2,)


@pytest.mark.parametrize(
    "text",
    ['{"cpuset":"2-1"}', "not json", "[]", '{"cpuset":5}', '{"numaNodeResources":[{"node":-1}]}'],
)
def test_malformed_resource_status_is_refused(text: str) -> None:
    with pytest.raises(InvalidValue):
        numa.resource_status({numa.ANNOTATION_RESOURCE_STATUS: text})


def test_pod_inputs() -> None:
    spec = numa.resource_spec({numa.ANNOTATION_RESOURCE_SPEC: '{"preferredCPUBindPolicy":"FullPCPUs"}'})
    assert spec.preferred_cpu_bind_policy == numa.CPUBindPolicy.FULL_PCPUS
    assert spec.to_json() == {"preferredCPUBindPolicy": "FullPCPUs"}
    topo = numa.numa_topology_spec(
        {numa.ANNOTATION_NUMA_TOPOLOGY_SPEC: '{"numaTopologyPolicy":"SingleNUMANode"}'}
    )
    assert topo.numa_topology_policy == numa.NUMATopologyPolicy.SINGLE_NUMA_NODE
    assert numa.numa_topology_spec({}) == numa.NUMATopologySpec()


def test_node_annotations_round_trip() -> None:
    cpus = [nrt.CPUDetail(1, 0, 0, 0), nrt.CPUDetail(0, 0, 0, 0)]
    text = nrt.cpu_topology_json(cpus)
    assert text == '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":0,"socket":0,"node":0}]}'
    assert nrt.cpu_topology({nrt.ANNOTATION_CPU_TOPOLOGY: text}) == tuple(sorted(cpus, key=lambda c: c.id))
    pools = (nrt.CPUSharedPool(0, 0, "0-1"), nrt.CPUSharedPool(1, 1))
    back = nrt.share_pools({nrt.ANNOTATION_CPU_SHARED_POOLS: nrt.share_pools_json(pools)})
    assert back == pools and nrt.pool_cpus(back) == {0, 1}
    assert nrt.share_pools({nrt.ANNOTATION_CPU_SHARED_POOLS: "null"}) == ()
    allocs = (nrt.PodCPUAlloc("ns", "web", "u1", "4-5", True),)
    assert nrt.pod_cpu_allocs_json(()) == "null"
    assert nrt.pod_cpu_allocs({nrt.ANNOTATION_POD_CPU_ALLOCS: nrt.pod_cpu_allocs_json(allocs)}) == allocs
    policy = nrt.kubelet_cpu_manager_policy(
        {nrt.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: '{"policy":"static","reservedCPUs":"1,0"}'}
    )
    assert (policy.policy, policy.reserved_cpus) == ("static", "0-1")
    sq = nrt.system_qos_resource({nrt.ANNOTATION_SYSTEM_QOS_RESOURCE: '{"cpuset":"7"}'})
    assert sq.exclusive_cpus == {7}  # exclusive unless it says otherwise
    assert (
        nrt.system_qos_resource(
            {nrt.ANNOTATION_SYSTEM_QOS_RESOURCE: '{"cpuset":"7","cpusetExclusive":false}'}
        ).exclusive_cpus
        == frozenset()
    )
    with pytest.raises(InvalidValue):
        nrt.share_pools({nrt.ANNOTATION_CPU_SHARED_POOLS: '[{"socket":"0"}]'})


def test_status_against_an_object() -> None:
    zone = nrt.Zone("node-0", resources=(nrt.ResourceInfo("cpu", "4", "4", "4"),))
    status = nrt.NodeTopologyStatus(
        (zone,), "None", {nrt.ANNOTATION_CPU_SHARED_POOLS: '[{"socket":0,"node":0}]'}
    )
    obj = status.apply_to(nrt.new_object("n", "uid-1"))
    assert status.difference(obj) == ""
    # equal JSON written differently is no difference; a different quantity spelling of the same amount
    # neither
    obj["metadata"]["annotations"][nrt.ANNOTATION_CPU_SHARED_POOLS] = '[ {"node":0, "socket":0} ]'
    obj["zones"][0]["resources"][0]["capacity"] = "4000m"
    assert status.difference(obj) == ""
    obj["zones"][0]["resources"][0]["available"] = "3"
    assert "cpu" in status.difference(obj)
    assert status.difference(None) == "no object"
    assert "ownerReferences" not in nrt.new_object("n", "")["metadata"]
