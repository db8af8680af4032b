"""NodeNUMAResource's shortcuts give the answers of the long way: NUMA admissions and scores shared between
identical nodes follow each node's own holding and report, and the batch Filter agrees with the node-by-node
one on every kind of node (unreported, labelled, steered by its report, plain) for every kind of pod."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koord.scheduler.framework import CodedVerdicts, CycleState, PodInfo
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.framework.snapshot import NodeSet, Snapshot
from koord.scheduler.framework.types import NodeInfo
from koord.scheduler.plugins.nodenumaresource import manager as manager_module
from koord.scheduler.plugins.nodenumaresource import placementscore
from koord.scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation
from koord.scheduler.plugins.nodenumaresource.kinds import KindCodes, one_of_each
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.testing.topology import TWO_SOCKETS, SimulatedTopology, node_resource_topology
from tests.support.counting import count_calls
from tests.support.scheduler.numakit import NUMA, S, add_node, kit, lsr, messages, placement, plain, report

POLICY = "node.koordinator.sh/numa-topology-policy"
SINGLE = {"numaTopologyPolicy": "SingleNUMANode"}


def plugin(k: MemoryScheduler) -> Any:
    return k.scheduler.profiles[S].instances[NUMA]


def test_identical_nodes_share_decisions_but_each_nodes_holding_decides() -> None:
    k = kit()
    for name in ("a", "b"):
        add_node(k, name, labels={POLICY: "SingleNUMANode"})
    for i in range(9):  # a NUMA node holds 4 CPUs: 4 pods per node, the ninth fits nowhere
        k.add_pod(lsr(f"p{i}", "4"))
    k.run()
    bound = k.bound()
    assert len(bound) == 8
    for name in ("a", "b"):
        mine = [p.split("/")[1] for p, n in bound.items() if n == name]
        numa = sorted(n.node for p in mine for n in placement(k, p).numa_node_resources)
        assert numa == [0, 1, 2, 3], (name, numa)
        sets = [placement(k, p).cpus for p in mine]
        assert frozenset().union(*sets) == frozenset(range(16))
    (left,) = {f"p{i}" for i in range(9)} - {p.split("/")[1] for p in bound}
    assert "0/2 nodes are available" in messages(k, left)[0]
    assert plugin(k).memo._items  # the shortcut was taken: decisions were kept


def test_a_changed_report_is_not_answered_from_the_old_one() -> None:
    k = kit()
    add_node(k, "a")
    k.add_pod(lsr("first", "4", numa=SINGLE))
    k.run()
    assert k.bound() == {"default/first": "a"}
    # the node now reports NUMA nodes of 2 CPUs: a pod of the same shape no longer fits one
    report(k, "a", SimulatedTopology(sockets=2, numa_per_socket=2, cores_per_numa=1, threads=2))
    k.add_pod(lsr("second", "4", numa=SINGLE))
    k.run()
    assert "default/second" not in k.bound()
    assert "Unaligned NUMA Hint" in messages(k, "second")[0]


def _cluster() -> MemoryScheduler:
    k = kit()
    add_node(k, "plain")
    add_node(k, "unreported", None)
    add_node(k, "labelled", labels={POLICY: "SingleNUMANode"})
    add_node(k, "labelled-too", labels={POLICY: "SingleNUMANode"})  # alike: decided once
    add_node(k, "plain-too")  # as "plain" before its pod: alike only in report
    add_node(k, "full-pcpus", labels={"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"})
    add_node(
        k,
        "static",
        kubelet=nrt.KubeletCPUManagerPolicy("static", {"full-pcpus-only": "true"}, "0-1"),
    )
    add_node(k, "reported-numa", policy="SingleNUMANodePodLevel")
    add_node(k, "reported-numa-too", policy="SingleNUMANodePodLevel")
    add_node(k, "small", SimulatedTopology(sockets=1, numa_per_socket=1, cores_per_numa=1, threads=2))
    k.add_pod(
        lsr(
            "held",
            "4",
            node_name="plain",
            annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-1,8-9"}'},
        )
    )
    k.cache.update_snapshot(k.snapshot)
    return k


@pytest.mark.parametrize(
    "pod",
    [
        plain("ls", "1"),
        plain("ls-odd", "3", "20Gi"),
        lsr("lsr", "2"),
        lsr("lsr-odd", "3"),
        lsr("lsr-numa", "4", numa=SINGLE),
        lsr("required", "2", spec={"requiredCPUBindPolicy": "FullPCPUs"}),
        lsr("spread", "2", spec={"preferredCPUBindPolicy": "SpreadByPCPUs"}),
    ],
    ids=lambda p: p["metadata"]["name"],
)
def test_batch_filter_and_score_agree_with_node_by_node(pod: dict[str, Any]) -> None:
    k = _cluster()
    p = plugin(k)
    infos = k.snapshot.node_infos()
    one = {}
    for ni in infos:
        state = CycleState(PodInfo(pod))
        p.pre_filter(state, pod)
        one[ni.name] = p.filter(state, pod, ni) is None
    state = CycleState(PodInfo(pod))
    p.pre_filter(state, pod)
    answer = p.filter_nodes(state, pod, NodeSet.of(k.snapshot, infos))
    if isinstance(answer, np.ndarray):
        batch = [bool(a) for a in answer]
    else:
        batch = [a is None or a.is_success for a in answer]
    assert dict(zip([ni.name for ni in infos], batch, strict=True)) == one
    binds = "koordinator.sh/qosClass" in (pod["metadata"].get("labels") or {})
    assert one["unreported"] is not binds  # a pod binding CPUs needs the node's report
    store = tm.store(state)
    chosen = {ni.name: store.get_affinity(ni.name) for ni in infos}  # the NUMA nodes Filter chose
    fit = [ni for ni in infos if one[ni.name]]
    scores = p.score_nodes(state, pod, NodeSet.of(k.snapshot, fit)).tolist()
    assert scores == [p.score(state, pod, ni) for ni in fit]
    # the same again with nothing remembered: the shortcuts changed no answer
    fresh = _cluster()
    q = plugin(fresh)
    state = CycleState(PodInfo(pod))
    q.pre_filter(state, pod)
    alone = {ni.name: q.filter(state, pod, ni) is None for ni in fresh.snapshot.node_infos()}
    assert alone == one
    store = tm.store(state)
    assert {ni.name: store.get_affinity(ni.name) for ni in infos} == chosen
    assert [q.score(state, pod, ni) for ni in fresh.snapshot.node_infos() if alone[ni.name]] == scores


def test_a_nodes_kind_is_worked_out_again_only_when_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Filter and Score ask every node's kind each cycle; kept per node, only the node the previous pod
    # went to works it out again. Stale kinds are what the tests above catch.
    k = kit()
    for i in range(12):
        add_node(k, f"n{i}")
    calls = count_calls(monkeypatch, NodeAllocation, "fingerprint")
    k.add_pod(lsr("first", "2", numa=SINGLE))
    k.run()
    for i in range(4):
        calls.n = 0
        k.add_pod(lsr(f"p{i}", "2", numa=SINGLE))
        k.run()
        assert f"default/p{i}" in k.bound()
        assert calls.n <= 6, (i, calls.n)  # it was 2 x 12 and more


def test_a_kept_kind_follows_the_nodes_holding_report_and_object() -> None:
    m = ResourceManager("MostAllocated")
    node = {"metadata": {"name": "a", "labels": {}}}
    m.topology_changed(node_resource_topology("a", TWO_SOCKETS))
    kind = m.kind("a", node)
    assert m.kind("a", node) is kind  # nothing changed: the kept one
    m.update("a", PodAllocation("u1", cpus=frozenset({0, 1})))
    held = m.kind("a", node)
    assert held != kind
    m.release("a", "u1")
    assert m.kind("a", node)[1] != held[1]
    m.topology_changed(node_resource_topology("a", SimulatedTopology(sockets=1, numa_per_socket=1)))
    reported = m.kind("a", node)
    assert reported[0] != kind[0]
    labelled = {"metadata": {"name": "a", "labels": {POLICY: "SingleNUMANode"}}}
    assert m.kind("a", labelled)[2] == "SingleNUMANode"
    m.node_deleted(labelled)
    m.update("a", PodAllocation("u2", cpus=frozenset({0, 1})))
    assert m.kind("a", labelled)[1] == held[1]  # a node made again starts from its new holding


def test_a_cycle_reads_its_state_once_for_all_the_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kinds of a cycle's nodes are asked together: reading the cycle state node by node was most of
    # a SingleNUMANode cycle over many nodes.
    reads = count_calls(monkeypatch, CycleState, "get")

    def cycle(nodes: int) -> int:
        k = kit()
        for i in range(nodes):
            add_node(k, f"n{i}")
        k.add_pod(lsr("p", "2", numa=SINGLE))
        reads.n = 0
        k.run()
        assert "default/p" in k.bound()
        return reads.n

    assert cycle(30) - cycle(6) < 24  # it was several reads a node more


def test_batch_filter_agrees_with_node_by_node_after_a_holding_changes() -> None:
    # Kinds are kept between cycles: a holding taken since must split two nodes that were alike.
    k = _cluster()
    p = plugin(k)
    pod = lsr("lsr-numa", "4", numa=SINGLE)

    def batch() -> dict[str, bool]:
        state = CycleState(PodInfo(pod))
        p.pre_filter(state, pod)
        infos = k.snapshot.node_infos()
        answer = p.filter_nodes(state, pod, NodeSet.of(k.snapshot, infos))
        return {ni.name: a is None or a.is_success for ni, a in zip(infos, answer, strict=True)}

    before = batch()
    assert before["labelled"] and before["labelled-too"]
    status = '{"cpuset":"0-15"}'
    k.add_pod(
        lsr(
            "all",
            "16",
            node_name="labelled",
            annotations={"scheduling.koordinator.sh/resource-status": status},
        )
    )
    k.cache.update_snapshot(k.snapshot)
    after = batch()
    assert not after["labelled"] and after["labelled-too"]
    one = {}
    for ni in k.snapshot.node_infos():
        state = CycleState(PodInfo(pod))
        p.pre_filter(state, pod)
        one[ni.name] = p.filter(state, pod, ni) is None
    assert after == one


def test_kind_codes_follow_holdings_reports_node_objects_and_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    m = ResourceManager("MostAllocated")
    codes = KindCodes(m)
    snap = Snapshot()
    for name in ("a", "b", "c"):
        m.topology_changed(node_resource_topology(name, TWO_SOCKETS))
        snap.set(NodeInfo(name, {"metadata": {"name": name, "labels": {}}}))

    def now() -> list[int]:
        got = codes.codes(NodeSet(snap, np.arange(len(snap))))
        assert got is not None
        return got.tolist()

    a, b, c = now()
    assert a == b == c and codes.worked_out == 3
    m.update("a", PodAllocation("u1", cpus=frozenset({0, 1})))
    a, b, c = now()
    assert a != b == c and codes.worked_out == 4  # only a's row again
    m.topology_changed(node_resource_topology("b", SimulatedTopology(sockets=1, numa_per_socket=1)))
    a, b2, c = now()
    assert b2 not in (a, c) and codes.worked_out == 5
    snap.set(NodeInfo("c", {"metadata": {"name": "c", "labels": {POLICY: "SingleNUMANode"}}}))
    a, b2, c2 = now()
    assert c2 not in (a, b2, c) and codes.worked_out == 6
    snap.remove("a")  # c's row moves: every row is worked out again
    c3, b3 = now()
    assert c3 != b3 and codes.worked_out == 8
    # More changes than the manager remembers: every row again.
    monkeypatch.setattr(manager_module, "LOG_SIZE", 4)
    for i in range(6):
        m.update("b", PodAllocation(f"v{i}"))
    now()
    assert codes.worked_out == 10


def test_pods_no_node_steers_need_no_kinds() -> None:
    k = kit()
    for i in range(4):
        add_node(k, f"n{i}")
    k.add_pod(lsr("p", "2"))  # binds CPUs, no NUMA policy: nodes are filtered and scored together
    k.run()
    assert "default/p" in k.bound() and plugin(k).kind_codes.worked_out == 0


def test_batch_filter_answers_a_code_per_distinct_verdict() -> None:
    # A SingleNUMANode pod is looked at on every node: the cycle gets one code per distinct verdict, not a
    # Status per node to sort out (the answers themselves are what the test above pins).
    k = _cluster()
    p = plugin(k)
    pod = lsr("lsr-numa", "4", numa=SINGLE)
    state = CycleState(PodInfo(pod))
    p.pre_filter(state, pod)
    infos = k.snapshot.node_infos()
    answer = p.filter_nodes(state, pod, NodeSet.of(k.snapshot, infos))
    assert isinstance(answer, CodedVerdicts)
    distinct = {a for a in answer if a is not None}
    assert len(answer.statuses) == len(distinct) + 1 < len(infos)


@pytest.mark.parametrize("seed", range(20))
def test_one_of_each_is_uniques_codes_a_position_of_each_and_inverse(seed: int) -> None:
    rng = np.random.default_rng(seed)
    codes = rng.integers(1, 9, size=int(rng.integers(0, 40)))
    present, positions, inverse = one_of_each(codes)
    want, want_inverse = np.unique(codes, return_inverse=True)
    assert present.tolist() == want.tolist() and inverse.tolist() == want_inverse.reshape(-1).tolist()
    assert codes[positions].tolist() == present.tolist()


def test_score_groups_a_kinds_alike_nodes_without_sorting_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    k = kit()
    for i in range(6):
        add_node(k, f"n{i}")
    sorted_keys = count_calls(monkeypatch, placementscore, "_alike_rows")
    for i in range(3):
        k.add_pod(lsr(f"p{i}", "4", numa=SINGLE))
    k.run()
    assert len(k.bound()) == 3
    # The nodes of each kind were alike (their holding came with their pods): grouped by kind, checked,
    # with no sort over kind, affinity, requested and allocatable (it was one a cycle).
    assert sorted_keys.n == 0
