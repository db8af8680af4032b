"""Nominated pods (kube-scheduler's PodNominator and ``RunFilterPluginsWithNominatedPods``) in
koord-scheduler's core: a pod nominated to a node keeps its room there from pods of lower or equal
priority; such a node is filtered with the nominated pods and without, and must pass both; the nominator
follows the informer and the scheduler's own decisions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from koord.scheduler.framework import CycleState, NodeInfo, PodInfo, Status
from tests.support.scheduler.memcluster import MemCluster, wait_for

GATED = {"schedulingGates": [{"name": "example.com/hold"}]}


@pytest.fixture
def c() -> Iterator[MemCluster]:
    cluster = MemCluster()
    yield cluster
    cluster.close()


def nominate(c: MemCluster, name: str, cpu: str, priority: int, node: str = "n1", **kw: Any) -> None:
    """A pending pod nominated to ``node`` that stays pending (gated)."""
    c.pod(name, cpu, priority=priority, status={"nominatedNodeName": node}, spec=GATED, **kw)


@pytest.mark.parametrize(("priority", "lands"), [(50, False), (100, False), (200, True)])
def test_room_on_a_node_is_kept_for_pods_nominated_there(c: MemCluster, priority: int, lands: bool) -> None:
    c.node("n1", cpu="4")
    c.pod("resident", "2", priority=1000, node="n1")
    nominate(c, "preemptor", "2", priority=100)
    c.pod("other", "2", priority=priority)
    c.schedule()
    if lands:
        assert wait_for(lambda: c.node_of("other")) == "n1"
    else:
        assert c.failed_scheduling("other").startswith("0/1 nodes are available: 1 Insufficient cpu.")
        assert c.node_of("other") == ""


def test_the_nominated_pod_takes_its_own_room(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    c.node("n2", cpu="4")
    c.pod("resident", "2", priority=1000, node="n1")
    c.pod("preemptor", "2", priority=100, status={"nominatedNodeName": "n1"})
    c.schedule()
    assert wait_for(lambda: c.node_of("preemptor")) == "n1"
    assert c.scheduler.nominator.pods_for_node("n1") == []


class NeedsCompany:
    """Like pod affinity: a node fits only with a pod labelled ``company=yes`` on it."""

    name = "NeedsCompany"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: CycleState, pod: Any, node_info: NodeInfo) -> Status | None:
        if (pod["metadata"].get("labels") or {}).get("wants") != "company":
            return None
        if any(p.labels.get("company") == "yes" for p in node_info.pods.values()):
            return None
        return Status.unschedulable("node(s) had no company")


@dataclass
class Count:
    n: int = 0

    def clone(self) -> Count:
        return Count(self.n)


class CountsAdded:
    """Rejects a node when its PreFilter state counts pods added by ``add_pod`` (the nominated pods)."""

    name = "CountsAdded"
    seen: list[int] = []

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: Any) -> Status | None:
        state.write("count", Count())
        return None

    def add_pod(self, state: CycleState, pod: Any, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        state.read("count").n += 1
        return None

    def remove_pod(
        self, state: CycleState, pod: Any, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        state.read("count").n -= 1
        return None

    def filter(self, state: CycleState, pod: Any, node_info: NodeInfo) -> Status | None:
        n = state.read("count").n
        CountsAdded.seen.append(n)
        if (pod["metadata"].get("labels") or {}).get("wants") == "alone" and n:
            return Status.unschedulable(f"{n} pod(s) added")
        return None


def cluster_with(*plugins: Any) -> MemCluster:
    enabled = [{"name": p.name} for p in plugins]
    return MemCluster(
        {"profiles": [{"plugins": {"multiPoint": {"enabled": enabled}}}]},
        plugins={p.name: p for p in plugins},
    )


@pytest.mark.parametrize(
    ("priority", "reason"), [(50, "node(s) had no company"), (200, "node(s) had no company")]
)
def test_a_node_must_fit_without_the_nominated_pods_too(priority: int, reason: str) -> None:
    c = cluster_with(NeedsCompany)
    try:
        c.node("n1", cpu="8")
        nominate(c, "friend", "1", priority=100, labels={"company": "yes"})
        c.pod("social", "1", priority=priority, labels={"wants": "company"})
        c.schedule()
        # With the nominated friend the node passes; without it, it does not: both must pass.
        assert c.failed_scheduling("social").startswith(f"0/1 nodes are available: 1 {reason}.")
        c.pod("real-friend", "1", node="n1", labels={"company": "yes"})
        c.schedule()
        assert wait_for(lambda: c.node_of("social")) == "n1"
    finally:
        c.close()


def test_nominated_pods_reach_prefilter_state_through_add_pod_on_a_copy() -> None:
    c = cluster_with(CountsAdded)
    CountsAdded.seen = []
    try:
        c.node("n1", cpu="8")
        c.node("n2", cpu="8")
        nominate(c, "ahead", "1", priority=100)
        c.pod("loner", "1", priority=10, labels={"wants": "alone"})
        c.schedule()
        assert wait_for(lambda: c.node_of("loner")) == "n2"
        # n1 was filtered with the nominated pod added to a copy of the state (1), n2 as it is (0).
        assert sorted(CountsAdded.seen) == [0, 1]
    finally:
        c.close()


def test_the_nominator_follows_the_informer(c: MemCluster) -> None:
    c.node("n1")
    nominate(c, "p", "1", priority=5)
    nom = c.scheduler.nominator
    assert [p.name for p in nom.pods_for_node("n1")] == ["p"]
    pod = c.stored("p")
    c.pods.put({**pod, "status": {**pod["status"], "nominatedNodeName": "n2"}})
    assert nom.pods_for_node("n1") == [] and [p.name for p in nom.pods_for_node("n2")] == ["p"]
    pod = c.stored("p")
    c.pods.put({**pod, "status": {k: v for k, v in pod["status"].items() if k != "nominatedNodeName"}})
    assert len(nom) == 0
    # A nomination the scheduler made survives updates that do not carry it yet.
    nom.add(PodInfo(c.stored("p")), "n1")
    pod = c.stored("p")
    c.pods.put({**pod, "metadata": {**pod["metadata"], "labels": {"x": "y"}}})
    assert [p.labels for p in nom.pods_for_node("n1")] == [{"x": "y"}]
    c.pods.put({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert len(nom) == 0
    nominate(c, "q", "1", priority=5)
    c.pods.remove("default/q")
    assert len(nom) == 0
    nominate(c, "r", "1", priority=5)
    pod = c.stored("r")
    c.pods.put({**pod, "spec": {**pod["spec"], "nodeName": "n1"}})  # bound by another scheduler
    assert len(nom) == 0


def test_without_nominations_the_filter_has_nothing_to_add(c: MemCluster) -> None:
    c.node("n1")
    pod = c.pod("p", "1", priority=5)
    state = CycleState(PodInfo(pod))
    assert c.framework.nominated_ahead(state, pod) == {}
    nominate(c, "low", "1", priority=1)
    assert c.framework.nominated_ahead(state, pod) == {}
    nominate(c, "high", "1", priority=9)
    assert [p.name for p in c.framework.nominated_ahead(state, pod)["n1"]] == ["high"]


class _CountingNodes(dict[str, dict[str, PodInfo]]):
    """The nominator's node -> pods map, counting the nodes whose nominations were looked at."""

    looked = 0

    def items(self) -> Any:
        _CountingNodes.looked += len(self)
        return super().items()

    def get(self, key: str, default: Any = None) -> Any:
        _CountingNodes.looked += 1
        return super().get(key, default)


def test_filtering_one_node_looks_only_at_that_nodes_nominations(c: MemCluster) -> None:
    # A preemption dry run filters a hundred candidate nodes one by one: each must not walk every
    # nomination of the cluster.
    for i in range(40):
        c.node(f"n{i}", cpu="4")
        nominate(c, f"preemptor-{i}", "1", priority=100, node=f"n{i}")
    pod = c.pod("p", "1", priority=100)
    state = CycleState(PodInfo(pod))
    nom = c.framework.nominator
    assert nom is not None and len(nom) == 40
    nom._by_node = _CountingNodes(nom._by_node)
    _CountingNodes.looked = 0
    c.cache.update_snapshot(c.snapshot)
    nodes = {ni.name: ni for ni in c.snapshot.node_infos()}
    assert c.framework.run_pre_filter(state, pod)[1] is None
    verdicts = [c.framework.filter_one(state, pod, nodes[f"n{i}"]) for i in range(10)]
    assert _CountingNodes.looked <= 10
    # each node still counts its own nominated pod (and p fits beside it)
    assert verdicts == [None] * 10
    assert [p.name for p in nom.ahead_on(PodInfo(pod), "n3")] == ["preemptor-3"]
    assert nom.ahead_on(PodInfo(c.pod("higher", "1", priority=101)), "n3") == []
