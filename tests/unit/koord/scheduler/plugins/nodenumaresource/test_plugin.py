"""NodeNUMAResource end to end in memory (MemoryScheduler): which pods get a cpuset and which CPUs, the
node labels and kubelet options that override, the reason given on nodes without a topology report, and
``resource-status`` as the agent's own parser reads it."""

from __future__ import annotations

import json

import pytest

from koord.scheduler.plugins.nodenumaresource.args import parse_args
from koordshared.apis.extension.numa import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.topology import SimulatedTopology
from tests.support.scheduler.numakit import (
    S,
    add_node,
    kit,
    lsr,
    messages,
    patched,
    placement,
    plain,
    report,
    status_text,
)


def test_lsr_pod_gets_whole_cores_and_the_agent_reads_them() -> None:
    k = kit()
    add_node(k, "a")
    k.add_pod(lsr("p", "4"))
    k.run()
    assert k.bound() == {"default/p": "a"}
    assert status_text(k, "p") == '{"cpuset":"0-1,8-9"}'  # Go's bytes: no NUMA policy, no NUMA nodes
    got = placement(k, "p")  # the agent's parser (koordshared.apis.extension.numa.resource_status)
    assert got.cpus == {0, 1, 8, 9} and got.numa_node_resources == ()
    # the bind policy used is written back for a pod that named none (Koordinator's appendResourceSpec)
    assert json.loads(patched(k, "p")[ANNOTATION_RESOURCE_SPEC]) == {"preferredCPUBindPolicy": "FullPCPUs"}


def test_successive_pods_never_share_a_cpu_and_follow_the_strategy() -> None:
    k = kit()
    add_node(k, "a")
    for name, cpus in (("p1", "2"), ("p2", "4"), ("p3", "2")):
        k.add_pod(lsr(name, cpus))
        k.run()
    assert placement(k, "p1").cpuset == "0,8"
    assert placement(k, "p2").cpuset == "4-5,12-13"  # LeastAllocated: the emptier socket's first node
    assert placement(k, "p3").cpuset == "2,10"  # socket 0 now as empty as socket 1: the lower node
    sets = [placement(k, n).cpus for n in ("p1", "p2", "p3")]
    assert sum(map(len, sets)) == len(frozenset().union(*sets)) == 8


def test_most_allocated_numa_strategy_by_node_label() -> None:
    k = kit()
    add_node(k, "a", labels={"node.koordinator.sh/numa-allocate-strategy": "MostAllocated"})
    for name in ("p1", "p2"):
        k.add_pod(lsr(name, "2"))
        k.run()
    assert (placement(k, "p1").cpuset, placement(k, "p2").cpuset) == ("0,8", "1,9")


def test_spread_by_pcpus_takes_one_thread_per_core() -> None:
    k = kit()
    add_node(k, "a")
    k.add_pod(lsr("p", "2", spec={"preferredCPUBindPolicy": "SpreadByPCPUs"}))
    k.add_pod(lsr("r", "4", spec={"requiredCPUBindPolicy": "SpreadByPCPUs"}))
    k.run()
    assert placement(k, "p").cpuset == "0-1"
    # required: one thread of each of 4 cores; no NUMA node has 4 such, both sockets do (a tie: socket
    # 0), and cores 0 and 1 offer their second threads 8 and 9
    assert placement(k, "r").cpuset == "2-3,8-9"
    assert ANNOTATION_RESOURCE_SPEC not in patched(k, "r")  # the pod named its policy


@pytest.mark.parametrize(
    ("labels", "priority_class", "qos"),
    [({}, "koord-batch", "LSR"), ({}, "koord-prod", "LS"), ({}, "koord-mid", "LSE")],
)
def test_only_lse_lsr_prod_pods_get_a_cpuset(labels: dict[str, str], priority_class: str, qos: str) -> None:
    k = kit()
    add_node(k, "a", labels=labels)
    k.add_pod(lsr("p", "2", qos=qos, priority_class=priority_class))
    k.run()
    assert k.bound() == {"default/p": "a"} and ANNOTATION_RESOURCE_STATUS not in patched(k, "p")


def test_default_cpu_bind_policy_empty_binds_only_pods_that_ask() -> None:
    k = kit({"defaultCPUBindPolicy": ""})
    add_node(k, "a")
    k.add_pod(lsr("quiet", "2"))
    k.add_pod(lsr("asks", "2", spec={"preferredCPUBindPolicy": "FullPCPUs"}))
    k.run()
    assert ANNOTATION_RESOURCE_STATUS not in patched(k, "quiet")
    assert placement(k, "asks").cpuset == "0,8"


def test_a_fractional_cpu_request_is_refused_everywhere() -> None:
    k = kit()
    add_node(k, "a")
    k.add_pod(lsr("p", "1500m"))
    k.run()
    assert k.bound() == {}
    (msg,) = messages(k, "p")
    assert msg.startswith("0/1 nodes are available: the requested CPUs must be integer. preemption:")


def test_node_without_topology_report_is_rejected_with_a_reason_and_taken_once_reported() -> None:
    k = kit()
    add_node(k, "bare", None)
    k.add_pod(lsr("p", "2"))
    k.add_pod(plain("x"))  # a pod that binds nothing does not need a report
    k.run()
    assert k.bound() == {"default/x": "bare"}
    (msg,) = messages(k, "p")
    assert msg == (
        "0/1 nodes are available: 1 node(s) CPU Topology not found (no NodeResourceTopology reported). "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    report(k, "bare", SimulatedTopology(sockets=1, numa_per_socket=1, cores_per_numa=8, threads=2))
    k.clock.advance(30)
    k.run()
    assert k.bound()["default/p"] == "bare" and placement(k, "p").cpuset == "0,8"


def test_the_reported_node_is_chosen_over_one_without_a_report() -> None:
    k = kit()
    add_node(k, "bare", None)
    add_node(k, "reported")
    k.add_pod(lsr("p", "2"))
    k.run()
    assert k.bound() == {"default/p": "reported"}


def test_node_label_full_pcpus_only_binds_every_whole_cpu_pod_and_needs_whole_cores() -> None:
    k = kit()
    add_node(k, "a", labels={"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"})
    k.add_pod(plain("ls", "2"))  # an unlabelled pod binds on such a node too
    k.add_pod(lsr("odd", "3"))
    k.add_pod(lsr("spread", "2", spec={"requiredCPUBindPolicy": "SpreadByPCPUs"}))
    k.run()
    assert placement(k, "ls").cpuset == "0,8"
    assert json.loads(patched(k, "ls")[ANNOTATION_RESOURCE_SPEC]) == {"requiredCPUBindPolicy": "FullPCPUs"}
    assert messages(k, "odd")[0].startswith("0/1 nodes are available: 1 node(s) requested cpus not multiple")
    assert "cpu bind policy conflicts with pod's required cpu bind policy" in messages(k, "spread")[0]


def test_static_kubelet_with_full_pcpus_only_and_its_reserved_cpus() -> None:
    k = kit()
    kubelet = nrt.KubeletCPUManagerPolicy("static", {"full-pcpus-only": "true"}, "0,8")
    add_node(k, "a", kubelet=kubelet)
    k.add_pod(lsr("p", "2"))
    k.run()
    # CPUs 0 and 8 are the kubelet's: NUMA node 0 has one core left; LeastAllocated goes to socket 1
    assert placement(k, "p").cpuset == "4,12"
    got = json.loads(patched(k, "p")[ANNOTATION_RESOURCE_SPEC])
    assert got == {"requiredCPUBindPolicy": "FullPCPUs"}  # the node made it required


def test_cpus_of_bound_pods_are_counted_from_their_resource_status() -> None:
    k = kit()
    bound = lsr("old", "4", node_name="a", annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1,8-9"}'})
    bound["status"]["phase"] = "Running"
    k.add_pod(bound)
    add_node(k, "a")
    k.add_pod(lsr("new", "4"))
    k.run()
    # the old pod was listed before its node's report: counted once the report came
    assert placement(k, "new").cpuset == "4-5,12-13"


def test_a_deleted_pod_frees_its_cpus_for_the_next() -> None:
    k = kit()
    add_node(k, "a", SimulatedTopology(sockets=1, numa_per_socket=1, cores_per_numa=2, threads=2))
    k.add_pod(lsr("p1", "4"))
    k.add_pod(lsr("p2", "2"))
    k.run()
    assert k.bound() == {"default/p1": "a"}  # the node has 4 CPUs
    k.delete_pod("default", "p1")
    k.clock.advance(30)
    k.run()
    assert k.bound().get("default/p2") == "a" and placement(k, "p2").cpuset == "0,2"


def test_args_defaults_and_validation() -> None:
    args = parse_args(None)
    assert args.default_cpu_bind_policy == "FullPCPUs"
    assert args.scoring_strategy.type == "LeastAllocated"
    assert args.scoring_strategy.resources == (("cpu", 1), ("memory", 1))
    assert args.default_numa_allocate_strategy == "LeastAllocated"
    most = parse_args({"numaScoringStrategy": {"type": "MostAllocated"}})
    assert most.default_numa_allocate_strategy == "MostAllocated"
    for bad, field in (
        ({"defaultCPUBindPolicy": "ConstrainedBurst"}, "defaultCPUBindPolicy"),
        ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "scoringStrategy.type"),
        ({"scoringStrategy": {"type": "LeastAllocated", "resources": []}}, "scoringStrategy.resources"),
        (
            {"numaScoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}},
            "numaScoringStrategy.resources[0].weight",
        ),
        ({"cpuBindPolicy": "FullPCPUs"}, "cpuBindPolicy"),
    ):
        with pytest.raises(InvalidArgs, match=field.replace("[", r"\[").replace("]", r"\]")):
            parse_args(bad)


def test_profile_uses_the_plugin_in_koord_scheduler_only() -> None:
    from koord.scheduler.plugins.nodenumaresource import NodeNUMAResource

    with pytest.raises(ValueError, match="koord-scheduler only"):
        NodeNUMAResource(None, object())
    assert S == "koord-scheduler"
