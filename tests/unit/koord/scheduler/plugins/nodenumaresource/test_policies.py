"""NUMA topology policies through NodeNUMAResource (MemoryScheduler) and the topology manager's merge
alone: SingleNUMANode places a pod within one NUMA node or not at all, Restricted within the fewest NUMA
nodes that fit it, BestEffort anywhere (preferring the fewest); the pod's policy against the node's;
``singleNUMANodeExclusive``; ``resource-status`` lists the NUMA nodes with what each gave."""

from __future__ import annotations

from koord.scheduler.framework.topologymanager import NUMATopologyHint, mask_of, mask_str, merge
from koordshared.apis.extension.numa import NUMATopologyPolicy
from koordshared.testing.topology import TWO_SOCKETS
from tests.support.scheduler.numakit import add_node, kit, lsr, messages, placement, plain, status_text

POLICY = "node.koordinator.sh/numa-topology-policy"
SINGLE, RESTRICTED, BEST = "SingleNUMANode", "Restricted", "BestEffort"
NODES = [0, 1, 2, 3]


def hint(*nodes: int, preferred: bool = True, score: int = 0) -> NUMATopologyHint:
    return NUMATopologyHint(mask_of(nodes), preferred, score=score)


# ---- the merge ---------------------------------------------------------------------------------------


def test_single_numa_node_merge_keeps_one_node_hints_and_the_best_score() -> None:
    cpu = [hint(0, score=10), hint(1, score=60), hint(0, 1, preferred=False)]
    memory = [hint(0, score=10), hint(1, score=60), hint(0, 1, preferred=False)]
    best, admitted, reasons = merge(
        NUMATopologyPolicy.SINGLE_NUMA_NODE, NODES, [{"cpu": cpu, "memory": memory}], "", {}
    )
    assert admitted and not reasons and best.affinity == mask_of([1]) and best.preferred


def test_single_numa_node_refuses_when_only_wider_hints_fit() -> None:
    cpu = [hint(0, 1), hint(2, 3)]
    _, admitted, reasons = merge(NUMATopologyPolicy.SINGLE_NUMA_NODE, NODES, [{"cpu": cpu}], "", {})
    assert not admitted
    assert reasons == ["Unaligned NUMA Hint cause cpu prefer [11 1100] among [11 1100]"]


def test_a_resource_without_hints_is_unsatisfied() -> None:
    _, admitted, reasons = merge(
        NUMATopologyPolicy.RESTRICTED, NODES, [{"cpu": [hint(0)], "memory": []}], "", {}
    )
    assert not admitted and reasons == ["Unsatisfied NUMA memory"]


def test_best_effort_admits_and_falls_back_to_every_node() -> None:
    best, admitted, _ = merge(
        NUMATopologyPolicy.BEST_EFFORT, NODES, [{"cpu": [hint(0)], "memory": [hint(1)]}], "", {}
    )
    assert admitted and best.affinity == mask_of(NODES) and not best.preferred


def test_exclusive_required_makes_shared_numa_nodes_unpreferred() -> None:
    cpu = [hint(0, score=90), hint(2, score=10)]
    shared = {0: "shared", 1: "shared", 2: "idle", 3: "idle"}
    best, admitted, _ = merge(NUMATopologyPolicy.SINGLE_NUMA_NODE, NODES, [{"cpu": cpu}], "Required", shared)
    assert admitted and best.affinity == mask_of([2])
    best, _, _ = merge(NUMATopologyPolicy.SINGLE_NUMA_NODE, NODES, [{"cpu": cpu}], "Preferred", shared)
    assert best.affinity == mask_of([0])


def test_mask_str_is_gos() -> None:
    assert [mask_str(m) for m in (1, 2, 3, 4, 5, 12)] == ["01", "10", "11", "100", "0101", "1100"]


# ---- through the plugin -----------------------------------------------------------------------------


def test_single_numa_node_places_cpus_and_memory_on_one_numa_node() -> None:
    k = kit()
    add_node(k, "a", labels={POLICY: SINGLE})
    k.add_pod(lsr("p", "4", "2Gi"))
    k.run()
    assert status_text(k, "p") == (
        '{"cpuset":"0-1,8-9","numaNodeResources":[{"node":0,"resources":{"cpu":"4","memory":"2Gi"}}]}'
    )
    got = placement(k, "p")  # as the agent reads it: its NUMA nodes with CPU
    assert got.numa_nodes_with_cpu() == (0,)


def test_single_numa_node_refuses_a_pod_bigger_than_a_numa_node() -> None:
    k = kit()
    add_node(k, "a", labels={POLICY: SINGLE})
    k.add_pod(lsr("p", "6"))
    k.run()
    assert k.bound() == {}
    (msg,) = messages(k, "p")
    assert msg.startswith("0/1 nodes are available: 1 Unaligned NUMA Hint cause cpu prefer [11 0101"), msg


def test_the_nrt_policy_single_numa_node_pod_level_is_honoured() -> None:
    k = kit()
    add_node(k, "a", policy="SingleNUMANodePodLevel")
    k.add_pod(lsr("p", "6"))
    k.run()
    assert k.bound() == {} and "Unaligned NUMA Hint" in messages(k, "p")[0]


def test_restricted_spreads_over_the_fewest_numa_nodes() -> None:
    k = kit()
    add_node(k, "a", labels={POLICY: RESTRICTED})
    k.add_pod(lsr("p", "6", "2Gi"))
    k.run()
    got = placement(k, "p")
    assert got.cpuset == "0-3,8,10"  # NUMA nodes 0 and 1, 3 CPUs each: a whole core, then a thread
    assert [(n.node, dict(n.resources)) for n in got.numa_node_resources] == [
        (0, {"cpu": "3", "memory": "1Gi"}),
        (1, {"cpu": "3", "memory": "1Gi"}),
    ]


def test_best_effort_places_on_one_numa_node_when_it_can_and_anywhere_when_not() -> None:
    k = kit()
    add_node(k, "a", labels={POLICY: BEST})
    k.add_pod(lsr("small", "2"))
    k.run()
    assert [n.node for n in placement(k, "small").numa_node_resources] == [0]
    k.add_pod(lsr("big", "12"))
    k.run()
    assert k.bound()["default/big"] == "a"
    assert len(placement(k, "big").cpus) == 12


def test_a_plain_pod_gets_numa_nodes_but_no_cpuset_under_a_numa_policy() -> None:
    k = kit()
    add_node(k, "a", labels={POLICY: SINGLE})
    k.add_pod(plain("ls", "2", "1Gi"))
    k.run()
    assert status_text(k, "ls") == '{"numaNodeResources":[{"node":0,"resources":{"cpu":"2","memory":"1Gi"}}]}'
    assert placement(k, "ls").numa_nodes_with_cpu() == (0,)  # the agent puts it on NUMA node 0's pool


def test_a_pod_policy_other_than_the_node_policy_does_not_fit_it() -> None:
    k = kit()
    add_node(k, "a", labels={POLICY: RESTRICTED})
    k.add_pod(lsr("p", "2", numa={"numaTopologyPolicy": SINGLE}))
    k.run()
    assert k.bound() == {}
    assert messages(k, "p")[0].startswith(
        "0/1 nodes are available: 1 node(s) NUMA Topology policy not match."
    )


def test_a_pod_policy_applies_on_a_node_without_one() -> None:
    k = kit()
    add_node(k, "a")
    k.add_pod(lsr("p", "6", numa={"numaTopologyPolicy": SINGLE}))
    k.add_pod(lsr("q", "2", numa={"numaTopologyPolicy": SINGLE}))
    k.run()
    assert list(k.bound()) == ["default/q"]
    assert [n.node for n in placement(k, "q").numa_node_resources] == [0]


def test_exclusive_required_keeps_a_single_numa_pod_off_numa_nodes_a_spanning_pod_uses() -> None:
    k = kit({"numaScoringStrategy": {"type": "MostAllocated"}})
    add_node(k, "a", TWO_SOCKETS)
    k.add_pod(lsr("wide", "6", numa={"numaTopologyPolicy": RESTRICTED}))  # NUMA nodes 0 and 1
    k.run()
    assert [n.node for n in placement(k, "wide").numa_node_resources] == [0, 1]
    # MostAllocated would pack on node 0 or 1; exclusivity (the pod default: Required) keeps it off them
    k.add_pod(lsr("single", "1", numa={"numaTopologyPolicy": SINGLE}))
    k.add_pod(
        lsr("shared-ok", "1", numa={"numaTopologyPolicy": SINGLE, "singleNUMANodeExclusive": "Preferred"})
    )
    k.run()
    assert [n.node for n in placement(k, "single").numa_node_resources] == [2]
    assert [n.node for n in placement(k, "shared-ok").numa_node_resources] == [0]
