"""DefaultPreemption through koord-scheduler's real core (default profile, in-memory caches), with cases
written from kube-scheduler's preemption tests (``default_preemption_test.go``): eligibility, the
nomination, the victims' deletion beside the scheduling loop with Events and conditions (a victim waiting
on Permit rejected instead), the messages and the metrics. The choices are in test_preemption_choice."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.framework import Status
from tests.support.scheduler.memcluster import MemCluster, wait_for

LOW, MID, HIGH = 0, 100, 1000


@pytest.fixture
def c() -> Iterator[MemCluster]:
    cluster = MemCluster()
    yield cluster
    cluster.close()


# ---- end to end -----------------------------------------------------------------------------------


def test_preemptor_is_nominated_victims_are_deleted_and_it_lands_there(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    c.pod("old", "2", priority=LOW, node="n1", started=100)
    young = c.pod("young", "2", priority=LOW, node="n1", started=10)
    high = c.pod("high", "2", priority=HIGH)

    assert c.attempt("high") == "n1"
    # Of two victims of equal priority, the one running longer is more important and is reprieved.
    assert c.deleted(1) == ["default/young"]
    assert c.failed_scheduling("high") == "0/1 nodes are available: 1 Insufficient cpu."
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
    assert c.metric("scheduler_preemption_attempts_total") == 1
    assert c.metric("scheduler_preemption_victims_sum") == 1


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
    assert c.deleted(1) == ["default/victim"]


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
        assert c.failed_scheduling("high") == (
            "0/1 nodes are available: 1 Insufficient cpu. "
            "preemption: waiting for the preemption for this pod to be finished"
        )
    finally:
        gate.set()
    assert c.deleted(1) == ["default/victim"]
    assert c.metric("scheduler_preemption_victims_count") == 1


def test_graceful_victims_make_the_preemptor_wait_on_its_nominated_node(c: MemCluster) -> None:
    c.api.graceful = True
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    c.pod("v1", "2", priority=LOW, node="n1", started=10)
    c.pod("v2", "2", priority=MID, node="n2")
    high = c.pod("high", "2", priority=HIGH)
    assert c.attempt("high") == "n1"
    c.deleted(1)
    wait_for(lambda: c.stored("v1")["metadata"].get("deletionTimestamp"))
    c.scheduler.queue.activate([high["metadata"]["uid"]])
    assert c.schedule(1) == 1
    assert c.failed_scheduling("high") == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node."
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
    c.scheduler.queue.delete(c.stored("waiting"))  # only "high" is tried here
    assert c.attempt("high") == "n1"
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
        assert c.attempt("high") == "n1"
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
    assert c.failed_scheduling("polite") == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
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
    message = c.failed_scheduling("high")
    if eligible:
        assert message == "0/2 nodes are available: 2 Insufficient cpu."  # preempted
    else:
        assert message.endswith("preemption: not eligible due to a terminating pod on the nominated node.")


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
    assert c.attempt("high") == "n2"
    assert c.deleted(1) == ["default/victim"]


# ---- no candidates: kube's messages --------------------------------------------------------------


def test_pods_of_higher_priority_are_never_victims(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    c.pod("a", "2", priority=HIGH, node="n1")
    c.pod("b", "2", priority=MID, node="n2")
    c.pod("mid", "2", priority=MID)
    assert c.schedule(1) == 1
    assert c.failed_scheduling("mid") == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert c.api.deleted == []


def test_nodes_preemption_cannot_help_are_not_tried(c: MemCluster) -> None:
    c.node("n1", cpu="2", labels={"zone": "b"})
    c.node("n2", cpu="2")
    c.pod("above", "2", priority=HIGH, node="n1")
    c.pod("victim", "2", priority=LOW, node="n2")
    c.pod("picky", "2", priority=MID, spec={"nodeSelector": {"zone": "b"}})
    assert c.schedule(1) == 1
    assert c.failed_scheduling("picky") == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    assert c.api.deleted == []


def test_unresolvable_everywhere_clears_the_nomination(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("huge", "8", priority=HIGH, status={"nominatedNodeName": "n1"})
    assert c.schedule(1) == 1
    assert c.failed_scheduling("huge") == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    assert wait_for(lambda: c.nominated("huge") == "")
    assert c.scheduler.nominator.pods_for_node("n1") == []


def test_a_preemptor_whose_victims_are_gone_is_bound_without_waiting_out_its_backoff(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    c.pod("victim", "2", priority=LOW, node="n1")
    high = c.pod("high", "2", priority=HIGH)
    assert c.scheduler.schedule_next(timeout=0)  # fails, nominates n1 and deletes the victim
    assert c.deleted(1) == ["default/victim"]
    uid = high["metadata"]["uid"]
    assert wait_for(lambda: c.scheduler.queue.where(uid) == "backoff")  # the victim's deletion moved it
    # The fake clock stands still: nothing of its one-second backoff has passed, and the idle loop takes
    # it anyway (kube-scheduler's SchedulerPopFromBackoffQ).
    assert c.scheduler.schedule_next(timeout=0)
    assert wait_for(lambda: c.node_of("high")) == "n1"
