"""DefaultPreemption through koord-scheduler's real core (default profile, in-memory caches), with cases
written from kube-scheduler's preemption tests (``default_preemption_test.go``): victims on one node,
PodDisruptionBudgets, the choice of node, eligibility, the nomination, the victims' deletion beside the
scheduling loop with Events and conditions, the messages and the metrics."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from koord.apis.strictargs import InvalidArgs
from koord.scheduler.framework import PodInfo, Status
from koord.scheduler.plugins.defaultpreemption.args import PreemptionArgs, parse_args
from koord.scheduler.plugins.defaultpreemption.candidates import Candidate, pick_one
from koord.scheduler.plugins.defaultpreemption.victims import Victims
from tests.unit.scheduler.memcluster import MemCluster, wait_for

LOW, MID, HIGH = 0, 100, 1000


@pytest.fixture
def c() -> Iterator[MemCluster]:
    cluster = MemCluster()
    yield cluster
    cluster.close()


def pdb(name: str, allowed: int, labels: dict[str, str], disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {
            "disruptionsAllowed": allowed,
            "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in disrupted},
        },
    }


def failed_scheduling(c: MemCluster, pod: str) -> str:
    messages = [m for obj, m in c.events("FailedScheduling") if obj == f"default/{pod}"]
    assert messages, f"no FailedScheduling event for {pod}"
    return messages[-1]


def preempt(c: MemCluster, pod: str) -> str:
    """One (failing) cycle for ``pod``; the node it was nominated to ("" when none)."""
    assert c.schedule(1) == 1
    writes = wait_for(lambda: c.api.statuses.get(f"default/{pod}"))
    return str(writes[-1][1] or "")


def metric(c: MemCluster, name: str) -> float | None:
    return c.registry.get_sample_value(name)


def deleted(c: MemCluster, count: int) -> list[str]:
    return sorted(wait_for(lambda: len(c.api.deleted) >= count and list(c.api.deleted)))


# ---- end to end -----------------------------------------------------------------------------------


def test_preemptor_is_nominated_victims_are_deleted_and_it_lands_there(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    c.pod("old", "2", priority=LOW, node="n1", started=100)
    young = c.pod("young", "2", priority=LOW, node="n1", started=10)
    high = c.pod("high", "2", priority=HIGH)

    assert preempt(c, "high") == "n1"
    # Of two victims of equal priority, the one running longer is more important and is reprieved.
    assert deleted(c, 1) == ["default/young"]
    assert failed_scheduling(c, "high") == "0/1 nodes are available: 1 Insufficient cpu."
    marked = c.api.statuses["default/young"][0][0]
    assert marked is not None
    assert (marked["type"], marked["status"], marked["reason"]) == (
        "DisruptionTarget",
        "True",
        "PreemptionByScheduler",
    )
    assert marked["message"] == "koord-scheduler: preempting to accommodate a higher priority pod"
    preempted = wait_for(lambda: c.events("Preempted"))
    assert preempted == [("default/young", f"Preempted by pod {high['metadata']['uid']} on node n1")]
    assert young["metadata"]["uid"] and c.pods.get("default/young") is None

    c.schedule()
    assert wait_for(lambda: c.node_of("high")) == "n1"
    assert metric(c, "scheduler_preemption_attempts_total") == 1
    assert metric(c, "scheduler_preemption_victims_sum") == 1


def test_deleting_victims_does_not_block_the_scheduling_loop(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.node("n2", cpu="1")
    c.pod("victim", "2", priority=LOW, node="n1")
    c.pod("high", "2", priority=HIGH)
    gate = c.api.delete_gate = threading.Event()
    try:
        assert c.schedule(1) == 1  # the deletion waits on the gate; the cycle is over
        c.pod("small", "1", priority=LOW)
        assert c.schedule(1) == 1
        assert wait_for(lambda: c.node_of("small")) == "n2"
        assert c.api.deleted == []
    finally:
        gate.set()
    assert deleted(c, 1) == ["default/victim"]


def test_a_preemptor_does_not_preempt_again_while_its_victims_are_being_deleted(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("victim", "2", priority=LOW, node="n1")
    high = c.pod("high", "2", priority=HIGH)
    gate = c.api.delete_gate = threading.Event()
    try:
        assert c.schedule(1) == 1
        wait_for(lambda: c.nominated("high") == "n1")
        c.scheduler.queue.activate([high["metadata"]["uid"]])
        assert c.schedule(1) == 1
        assert failed_scheduling(c, "high").endswith(
            "preemption: waiting for the preemption for this pod to be finished."
        )
    finally:
        gate.set()
    assert deleted(c, 1) == ["default/victim"]
    assert metric(c, "scheduler_preemption_victims_count") == 1


def test_graceful_victims_make_the_preemptor_wait_on_its_nominated_node(c: MemCluster) -> None:
    c.api.graceful = True
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    c.pod("v1", "2", priority=LOW, node="n1", started=10)
    c.pod("v2", "2", priority=MID, node="n2")
    high = c.pod("high", "2", priority=HIGH)
    assert preempt(c, "high") == "n1"
    deleted(c, 1)
    wait_for(lambda: c.pods.get("default/v1")["metadata"].get("deletionTimestamp"))
    c.scheduler.queue.activate([high["metadata"]["uid"]])
    assert c.schedule(1) == 1
    assert failed_scheduling(c, "high") == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node.."
    )
    assert c.api.deleted == ["default/v1"]  # v2, the other candidate, is left alone
    c.pods.remove("default/v1")  # kubelet confirms
    c.schedule()
    assert wait_for(lambda: c.node_of("high")) == "n1"


def test_lower_priority_pods_nominated_to_the_node_lose_their_nomination(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("victim", "2", priority=LOW, node="n1")
    c.pod("waiting", "3", priority=MID, status={"nominatedNodeName": "n1"})
    c.pod("high", "2", priority=HIGH)
    assert c.scheduler.nominator.pods_for_node("n1")[0].name == "waiting"
    c.scheduler.queue.delete(c.pods.get("default/waiting"))  # only "high" is tried here
    assert preempt(c, "high") == "n1"
    wait_for(lambda: (None, "") in c.api.statuses.get("default/waiting", []))
    assert wait_for(lambda: c.nominated("waiting") == "")


def test_victim_deletion_failure_sends_the_preemptor_back_to_the_active_queue(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("victim", "2", priority=LOW, node="n1")
    high = c.pod("high", "2", priority=HIGH)
    c.api.fail_delete = "etcdserver: request timed out"
    gate = c.api.delete_gate = threading.Event()
    assert c.schedule(1) == 1
    uid = high["metadata"]["uid"]
    wait_for(lambda: c.scheduler.queue.where(uid) == "unschedulable")
    gate.set()
    assert wait_for(lambda: c.scheduler.queue.where(uid) == "active")


class Holds:
    """Permit: pods labelled ``hold=yes`` wait (as a gang member waits for its gang)."""

    name = "Holds"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def permit(self, state: Any, pod: Any, node_name: str) -> tuple[Status | None, float]:
        held = (pod["metadata"].get("labels") or {}).get("hold") == "yes"
        return (Status.wait(), 600.0) if held else (None, 0.0)


def test_a_victim_waiting_on_permit_is_rejected_not_deleted() -> None:
    c = MemCluster(
        {"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Holds"}]}}}]},
        plugins={"Holds": Holds},
    )
    try:
        c.node("n1", cpu="2")
        held = c.pod("held", "2", priority=LOW, labels={"hold": "yes"})
        assert c.schedule(1) == 1
        uid = held["metadata"]["uid"]
        assert c.scheduler.waiting.get(uid) is not None and c.cache.is_assumed(uid)
        c.pod("high", "2", priority=HIGH)
        assert preempt(c, "high") == "n1"
        wait_for(lambda: c.events("Preempted"))
        assert c.api.deleted == []
        wait_for(lambda: not c.cache.is_assumed(uid))
        c.schedule(2)
        assert wait_for(lambda: c.node_of("high")) == "n1"
    finally:
        c.close()


# ---- eligibility (PodEligibleToPreemptOthers) ------------------------------------------------------


def test_preemption_policy_never_does_not_preempt(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("victim", "2", priority=LOW, node="n1")
    c.pod("polite", "2", priority=HIGH, spec={"preemptionPolicy": "Never"})
    assert c.schedule(1) == 1
    assert failed_scheduling(c, "polite") == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.."
    )
    assert c.api.deleted == [] and c.nominated("polite") == ""


@pytest.mark.parametrize(
    ("victim", "eligible"),
    [
        ({"priority": LOW, "terminating": True, "marked": True}, False),
        ({"priority": LOW, "terminating": True, "marked": False}, True),  # not terminating by preemption
        ({"priority": HIGH + 1, "terminating": True, "marked": True}, True),  # not a pod it may preempt
        ({"priority": LOW, "terminating": False, "marked": True}, True),
    ],
)
def test_terminating_victims_on_the_nominated_node(
    c: MemCluster, victim: dict[str, Any], eligible: bool
) -> None:
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    meta = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if victim["terminating"] else {}
    mark = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    status = {"conditions": [mark]} if victim["marked"] else {}
    c.pod("leaving", "2", priority=victim["priority"], node="n1", metadata=meta, status=status)
    c.pod("other", "2", priority=LOW, node="n2")
    c.pod("high", "2", priority=HIGH, status={"nominatedNodeName": "n1"})
    assert c.schedule(1) == 1
    message = failed_scheduling(c, "high")
    if eligible:
        assert message == "0/2 nodes are available: 2 Insufficient cpu."  # preempted
    else:
        assert message.endswith("preemption: not eligible due to a terminating pod on the nominated node..")


def test_nominated_node_now_unresolvable_allows_preempting_elsewhere(c: MemCluster) -> None:
    c.node("n1", cpu="2", labels={"zone": "a"})
    c.node("n2", cpu="2", labels={"zone": "b"})
    terminating = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
    mark = {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}
    c.pod("leaving", "2", priority=LOW, node="n1", metadata=terminating, status=mark)
    c.pod("victim", "2", priority=LOW, node="n2")
    c.pod(
        "high", "2", priority=HIGH, status={"nominatedNodeName": "n1"}, spec={"nodeSelector": {"zone": "b"}}
    )
    assert preempt(c, "high") == "n2"
    assert deleted(c, 1) == ["default/victim"]


# ---- no candidates: kube's messages --------------------------------------------------------------


def test_pods_of_higher_priority_are_never_victims(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    c.pod("a", "2", priority=HIGH, node="n1")
    c.pod("b", "2", priority=MID, node="n2")
    c.pod("mid", "2", priority=MID)
    assert c.schedule(1) == 1
    assert failed_scheduling(c, "mid") == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
    )
    assert c.api.deleted == []


def test_nodes_preemption_cannot_help_are_not_tried(c: MemCluster) -> None:
    c.node("n1", cpu="2", labels={"zone": "b"})
    c.node("n2", cpu="2")
    c.pod("above", "2", priority=HIGH, node="n1")
    c.pod("victim", "2", priority=LOW, node="n2")
    c.pod("picky", "2", priority=MID, spec={"nodeSelector": {"zone": "b"}})
    assert c.schedule(1) == 1
    assert failed_scheduling(c, "picky") == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.."
    )
    assert c.api.deleted == []


def test_unresolvable_everywhere_clears_the_nomination(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("huge", "8", priority=HIGH, status={"nominatedNodeName": "n1"})
    assert c.schedule(1) == 1
    assert failed_scheduling(c, "huge") == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
    )
    assert wait_for(lambda: c.nominated("huge") == "")
    assert c.scheduler.nominator.pods_for_node("n1") == []


# ---- victims on one node (SelectVictimsOnNode) ----------------------------------------------------


def test_medium_priority_pod_is_preempted_but_the_small_low_priority_one_stays(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    c.pod("p1.1", "1", priority=LOW, node="n1")
    c.pod("p1.2", "3", priority=MID, node="n1")
    c.pod("high", "3", priority=HIGH)
    assert preempt(c, "high") == "n1"
    assert deleted(c, 1) == ["default/p1.2"]


def test_mixed_priorities_keep_the_most_important_pods(c: MemCluster) -> None:
    c.node("n1", cpu="5")
    for name, prio, started in (("a", MID, 50), ("b", LOW, 50), ("c", MID, 10), ("d", HIGH - 1, 50)):
        c.pod(name, "1", priority=prio, node="n1", started=started)
    c.pod("high", "3", priority=HIGH)
    assert preempt(c, "high") == "n1"
    # 1 cpu free; 2 more needed: d, then the older MID (a) are reprieved; the younger MID and LOW go.
    assert deleted(c, 2) == ["default/b", "default/c"]


def test_pdb_violating_victims_are_reprieved_first(c: MemCluster) -> None:
    c.informers["poddisruptionbudgets"].put(pdb("guard", 0, {"app": "db"}))
    c.node("n1", cpu="2")
    c.pod("guarded", "1", priority=LOW, node="n1", labels={"app": "db"}, started=10)
    c.pod("plain", "1", priority=LOW, node="n1", started=100)
    c.pod("high", "1", priority=HIGH)
    assert preempt(c, "high") == "n1"
    # "plain" is more important (older) but "guarded" would violate its budget: it is reprieved first.
    assert deleted(c, 1) == ["default/plain"]


@pytest.mark.parametrize(
    ("allowed", "disrupted", "violations"),
    [
        (1, (), 1),  # two victims, one disruption allowed
        (1, ("other",), 1),  # a disrupted pod that is no victim changes nothing
        (1, ("p1",), 0),  # p1's eviction was processed: only p2 uses the budget
        (0, ("p1",), 1),  # ... but none is left for p2
    ],
)
def test_pdb_violations_are_counted_as_kube_counts_them(
    c: MemCluster, allowed: int, disrupted: tuple[str, ...], violations: int
) -> None:
    c.informers["poddisruptionbudgets"].put(pdb("guard", allowed, {"app": "foo"}, disrupted))
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    c.pod("p1", "1", priority=LOW, node="n1", labels={"app": "foo"})
    c.pod("p2", "1", priority=LOW, node="n1", labels={"app": "foo"})
    c.pod("q1", "1", priority=MID, node="n2")
    c.pod("q2", "1", priority=MID, node="n2")
    c.pod("high", "2", priority=HIGH)
    # n2's victims have the higher priority: n1 wins unless its budget is violated.
    assert preempt(c, "high") == ("n2" if violations else "n1")


def test_a_budget_with_an_empty_selector_covers_nothing(c: MemCluster) -> None:
    empty = pdb("all", 0, {})
    c.informers["poddisruptionbudgets"].put(empty)
    c.node("n1", cpu="1")
    c.node("n2", cpu="1")
    c.pod("p1", "1", priority=LOW, node="n1", labels={"app": "foo"})
    c.pod("q1", "1", priority=MID, node="n2")
    c.pod("high", "1", priority=HIGH)
    assert preempt(c, "high") == "n1"


# ---- choosing the node (pickOneNodeForPreemption) -------------------------------------------------


def _candidate(node: str, prios_starts: list[tuple[int, float]], violations: int = 0) -> Candidate:
    pods = []
    for i, (prio, started) in enumerate(prios_starts):
        stamp = f"2026-01-01T00:{int(started) // 60:02d}:{int(started) % 60:02d}Z"
        pods.append(
            PodInfo(
                {
                    "metadata": {"name": f"{node}-{i}", "namespace": "default", "uid": f"{node}-{i}"},
                    "spec": {"priority": prio},
                    "status": {"startTime": stamp},
                }
            )
        )
    pods.sort(key=lambda p: -p.priority)
    return Candidate(node, Victims(pods, violations))


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        # the fewest PDB violations
        ({"a": ([(LOW, 0)], 1), "b": ([(MID, 0), (MID, 0)], 0)}, "b"),
        # the lowest priority among the most important victims
        ({"a": ([(MID, 0)], 0), "b": ([(LOW, 0), (LOW, 0), (LOW, 0)], 0)}, "b"),
        # same top priority: the smallest sum of priorities
        ({"a": ([(MID, 0), (MID, 0)], 0), "b": ([(MID, 0), (LOW, 0)], 0)}, "b"),
        # negative priorities: shifted before summing, so fewer pods win
        ({"a": ([(-10, 0), (-10, 0)], 0), "b": ([(-10, 0)], 0)}, "b"),
        # same sums: the fewest victims
        ({"a": ([(MID, 0), (LOW, 0), (LOW, 0)], 0), "b": ([(MID, 0), (LOW, 0)], 0)}, "b"),
        # all equal but start times: the latest start among the top-priority victims
        ({"a": ([(MID, 10), (LOW, 50)], 0), "b": ([(MID, 20), (LOW, 5)], 0)}, "b"),
        # ... the earliest of the top-priority victims counts
        ({"a": ([(MID, 30), (MID, 1)], 0), "b": ([(MID, 20), (MID, 20)], 0)}, "b"),
        # complete tie: the first
        ({"a": ([(MID, 0)], 0), "b": ([(MID, 0)], 0)}, "a"),
    ],
)
def test_pick_one_node_for_preemption(candidates: dict[str, Any], want: str) -> None:
    given = [_candidate(node, pods, violations) for node, (pods, violations) in candidates.items()]
    assert pick_one(given, now=1e10).node == want


@pytest.mark.parametrize(("absolute", "want"), [(1, "n1"), (100, "n2")])
def test_dry_run_stops_after_the_candidates_the_args_ask_for(absolute: int, want: str) -> None:
    args = {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": absolute}
    cluster = MemCluster({"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": args}]}]})
    try:
        cluster.node("n1", cpu="1")
        cluster.node("n2", cpu="1")
        cluster.pod("mid", "1", priority=MID, node="n1")
        cluster.pod("low", "1", priority=LOW, node="n2")
        cluster.pod("high", "1", priority=HIGH)

        class StartAtN1:
            def randrange(self, n: int) -> int:
                return [ni.name for ni in cluster.snapshot.node_infos()].index("n1")

        cluster.plugin("DefaultPreemption").rng = StartAtN1()
        # n1 is visited first; one candidate is enough, or else n2 (a lower victim) wins.
        assert preempt(cluster, "high") == want
    finally:
        cluster.close()


# ---- args -----------------------------------------------------------------------------------------


def test_args_defaults_and_candidate_count() -> None:
    args = parse_args(None)
    assert args == PreemptionArgs(10, 100)
    assert [args.num_candidates(n) for n in (5, 100, 5000)] == [5, 100, 500]
    assert PreemptionArgs(50, 1).num_candidates(7) == 3


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (
            {"minCandidateNodesPercentage": 101},
            "minCandidateNodesPercentage: Invalid value: 101: not in valid",
        ),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute: Invalid value: -1"),
        (
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        ),
        ({"minCandidateNodes": 1}, "unknown field(s) minCandidateNodes"),
        ({"minCandidateNodesAbsolute": "5"}, "minCandidateNodesAbsolute"),
    ],
)
def test_bad_args_are_refused(raw: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidArgs, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_args(raw)
