"""NodeNUMAResource's bookkeeping: a node's CPUs are never given twice, whether cycles follow one another
before their bindings land or Reserve runs on several threads at once; Unreserve, a failed binding and a
pod's deletion give them back; preemption's what-ifs see a victim's CPUs free."""

from __future__ import annotations

import threading
from typing import Any

from koord.scheduler.framework import CycleState, PodInfo
from koord.scheduler.framework.snapshot import NodeSet
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing.topology import TWO_SOCKETS
from tests.support.scheduler.numakit import NUMA, S, add_node, kit, lsr, messages, placement, plain


def plugin(k: MemoryScheduler) -> Any:
    return k.scheduler.profiles[S].instances[NUMA]


def reserve(k: MemoryScheduler, pod: dict[str, Any], node: str = "a") -> tuple[CycleState, Any]:
    p = plugin(k)
    state = CycleState(PodInfo(pod))
    assert p.pre_filter(state, pod) is None
    return state, p.reserve(state, pod, node)


def test_cycles_ahead_of_their_bindings_never_share_a_cpu_and_the_ninth_is_refused() -> None:
    k = kit()
    add_node(k, "a", cpu="32")
    for i in range(9):
        k.add_pod(lsr(f"p{i}", "2"))
    k.run()
    bound = [f"p{i}" for i in range(9) if f"default/p{i}" in k.bound()]
    assert len(bound) == 8  # 16 CPUs, though the Node's allocatable (32) would take more
    sets = [placement(k, n).cpus for n in bound]
    assert frozenset().union(*sets) == frozenset(range(16)) and sum(map(len, sets)) == 16
    (left,) = set(f"p{i}" for i in range(9)) - set(bound)
    assert "not enough cpus available to satisfy request" in messages(k, left)[0]


def test_concurrent_reserves_on_one_node_never_overlap() -> None:
    k = kit()
    add_node(k, "a")
    k.cache.update_snapshot(k.snapshot)
    pods = [lsr(f"p{i}", "2") for i in range(10)]
    results: dict[str, Any] = {}
    start = threading.Barrier(len(pods))

    def one(pod: dict[str, Any]) -> None:
        start.wait()
        results[pod["metadata"]["name"]] = reserve(k, pod)

    threads = [threading.Thread(target=one, args=(p,)) for p in pods]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    granted = {n: s for n, (s, st) in results.items() if st is None}
    refused = {n: st for n, (_, st) in results.items() if st is not None}
    assert len(granted) == 8 and len(refused) == 2
    cpus = [plugin(k)._state(s).allocation.cpus for s in granted.values()]
    assert sum(map(len, cpus)) == len(frozenset().union(*cpus)) == 16
    assert all("not enough cpus" in st.message for st in refused.values())


def test_unreserve_gives_the_cpus_back() -> None:
    k = kit()
    add_node(k, "a")
    k.cache.update_snapshot(k.snapshot)
    first = lsr("first", "4")
    state, st = reserve(k, first)
    assert st is None and plugin(k)._state(state).allocation.cpus == {0, 1, 8, 9}
    plugin(k).unreserve(state, first, "a")
    state2, _ = reserve(k, lsr("second", "4"))
    assert plugin(k)._state(state2).allocation.cpus == {0, 1, 8, 9}


def test_a_failed_binding_frees_the_cpus_and_the_pod_binds_later() -> None:
    k = kit()
    add_node(k, "a")
    failures = iter(["conflict"])
    k.api.fail_bind = lambda pod, node: next(failures, "")
    k.add_pod(lsr("p", "4"))
    k.run()
    assert k.bound() == {}
    assert plugin(k).manager.describe("a")["allocatedPods"] == []  # forgotten: nothing held
    k.clock.advance(30)
    k.run()
    assert k.bound() == {"default/p": "a"} and placement(k, "p").cpuset == "0-1,8-9"


def test_a_finished_pod_frees_its_cpus() -> None:
    k = kit()
    add_node(k, "a")
    done = lsr(
        "done",
        "16",
        node_name="a",
        annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-15"}'},
    )
    k.add_pod(done)
    assert plugin(k).manager.describe("a")["availableCPUs"] == ""
    k.add_pod({**done, "status": {"phase": "Succeeded"}})
    assert plugin(k).manager.describe("a")["availableCPUs"] == "0-15"


def test_preemption_frees_a_victims_cpus_in_its_what_if() -> None:
    k = kit()
    add_node(k, "a", labels={"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"})
    for i in range(8):
        low = lsr(f"low{i}", "2")
        low["spec"]["priority"] = 10
        k.add_pod(low)
    k.run()
    assert len(k.bound()) == 8
    high = lsr("high", "2")
    high["spec"]["priority"] = 1000
    k.add_pod(high)
    k.run()
    (victim,) = k.api.deleted  # one victim is enough: its two CPUs
    ns, name = victim.split("/")
    freed = placement(k, name).cpus
    k.delete_pod(ns, name)
    k.clock.advance(30)
    k.run()
    assert k.bound().get("default/high") == "a" and placement(k, "high").cpus == freed


def test_scores_batch_and_one_by_one_agree_and_match_hand_figures() -> None:
    k = kit()
    add_node(k, "empty")
    add_node(k, "busy")
    add_node(k, "numa", labels={"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"})
    bound = lsr(
        "old",
        "4",
        "4Gi",
        node_name="busy",
        annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-1,8-9"}'},
    )
    k.add_pod(bound)
    k.cache.update_snapshot(k.snapshot)
    p = plugin(k)
    for pod, want in (
        (plain("x", "2", "4Gi"), {"empty": 90, "busy": 74, "numa": 62}),
        (lsr("y", "2", "4Gi"), {"empty": 90, "busy": 74, "numa": 62}),
    ):
        state = CycleState(PodInfo(pod))
        assert p.pre_filter(state, pod) is None
        infos = k.snapshot.node_infos()
        for ni in infos:
            assert p.filter(state, pod, ni) is None
        one = {ni.name: p.score(state, pod, ni) for ni in infos}
        batch = p.score_nodes(state, pod, NodeSet.of(k.snapshot, infos))
        assert one == want, (pod["metadata"]["name"], one)
        assert dict(zip([ni.name for ni in infos], batch.tolist(), strict=True)) == want


def test_most_allocated_scoring_prefers_the_busy_node() -> None:
    k = kit(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}, weight=10
    )
    add_node(k, "empty", TWO_SOCKETS)
    add_node(k, "busy", TWO_SOCKETS)
    k.add_pod(
        lsr(
            "old",
            "4",
            node_name="busy",
            annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-1,8-9"}'},
        )
    )
    k.add_pod(lsr("new", "2"))
    k.run()
    assert k.bound()["default/new"] == "busy"
