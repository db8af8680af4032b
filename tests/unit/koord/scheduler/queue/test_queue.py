"""The scheduling queue against kube-scheduler's PriorityQueue behaviour: PrioritySort order, backoff
1 s doubling to 10 s, unschedulable pods requeued only by events their rejecting plugins registered (and
whose hint says Queue), any event for a pod no plugin claimed, events during an attempt replayed, gated
pods, the 5-minute flush, updates and deletions while queued."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord.scheduler.framework import Action, ClusterEvent, ClusterEventWithHint, Status
from koord.scheduler.framework.events import NODE, NODE_ADD, QUEUE, SKIP
from koord.scheduler.plugins.queuesort import PrioritySort
from koord.scheduler.plugins.schedulinggates import SchedulingGates
from koord.scheduler.queue.queue import SchedulingQueue
from koordshared.testing import FakeClock, pod

GATES = SchedulingGates(None, None)
SORT = PrioritySort(None, None)


def queue(
    hints: Mapping[str, tuple[ClusterEventWithHint, ...]] | None = None,
) -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock()

    def gate(p: Any) -> Status | None:
        st = GATES.pre_enqueue(p)
        return None if st is None else st.with_plugin("SchedulingGates")

    q = SchedulingQueue(SORT.less, gate, lambda p: hints or {}, clock=clock)
    return q, clock


def names(q: SchedulingQueue) -> list[str]:
    out = []
    while (qpi := q.pop(timeout=0)) is not None:
        out.append(qpi.info.name)
        q.done(qpi.uid)
    return out


def test_priority_then_arrival_order() -> None:
    q, clock = queue()
    q.add(pod("low", priority=1))
    clock.advance(1)
    q.add(pod("high", priority=10))
    clock.advance(1)
    q.add(pod("low2", priority=1))
    q.add(pod("high2", priority=10))
    assert names(q) == ["high", "high2", "low", "low2"]


def test_backoff_doubles_from_one_second_to_ten() -> None:
    q, clock = queue()
    q.add(pod("p"))
    waits = []
    for _ in range(6):
        qpi = q.pop(timeout=0)
        assert qpi is not None
        qpi.error = True
        q.add_unschedulable(qpi)
        waits.append(q.backoff_duration(qpi))
        assert q.pop(timeout=0) is None  # still backing off
        clock.advance(waits[-1])
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def rejected(q: SchedulingQueue, name: str, plugin: str) -> str:
    q.add(pod(name))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    qpi.unschedulable_plugins = {plugin} if plugin else set()
    q.add_unschedulable(qpi)
    return qpi.uid


def test_only_registered_events_whose_hint_says_queue_requeue_a_pod() -> None:
    def big_enough(p: Any, old: Any, new: Any) -> Any:
        return QUEUE if new and new.get("big") else SKIP

    hints = {"Fit": (ClusterEventWithHint(ClusterEvent(NODE, Action.ADD), big_enough),)}
    q, clock = queue(hints)
    uid = rejected(q, "p", "Fit")
    assert q.where(uid) == "unschedulable"
    assert q.on_event(ClusterEvent(NODE, Action.UPDATE_NODE_LABEL), {}, {"big": True}) == 0  # not registered
    assert q.on_event(NODE_ADD, None, {"big": False}) == 0  # the hint says skip
    assert q.where(uid) == "unschedulable"
    assert q.on_event(NODE_ADD, None, {"big": True}) == 1
    assert q.where(uid) == "backoff"
    clock.advance(1)
    assert names(q) == ["p"]


def test_a_pod_no_plugin_claimed_is_requeued_by_any_event_and_a_failing_hint_counts_as_queue() -> None:
    def broken(p: Any, old: Any, new: Any) -> Any:
        raise RuntimeError("bug in a hint")

    q, _ = queue({"Fit": (ClusterEventWithHint(ClusterEvent(NODE, Action.ALL), broken),)})
    unclaimed = rejected(q, "a", "")
    q2_uid = rejected(q, "b", "Fit")
    q.on_event(ClusterEvent(NODE, Action.UPDATE_NODE_LABEL), {}, {})
    assert q.where(unclaimed) == "backoff" and q.where(q2_uid) == "backoff"


def test_an_event_during_the_attempt_is_replayed_when_it_fails() -> None:
    q, _ = queue({"Fit": (ClusterEventWithHint(ClusterEvent(NODE, Action.ADD)),)})
    q.add(pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.on_event(NODE_ADD, None, {})  # arrives while the pod is being scheduled
    qpi.unschedulable_plugins = {"Fit"}
    q.add_unschedulable(qpi)
    assert q.where(qpi.uid) == "backoff"  # not parked: the new node may fit it


def test_gated_pods_wait_for_their_gates() -> None:
    q, _ = queue()
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    q.add(gated)
    uid = gated["metadata"]["uid"]
    assert q.where(uid) == "gated" and q.pop(timeout=0) is None
    assert q.counts()["gated"] == 1
    open_ = {**gated, "spec": {**gated["spec"], "schedulingGates": []}}
    q.update(gated, open_)
    assert q.where(uid) == "active"
    assert names(q) == ["g"]


def test_the_unschedulable_flush_after_five_minutes() -> None:
    q, clock = queue({"Fit": ()})
    uid = rejected(q, "p", "Fit")
    clock.advance(299)
    assert q.flush_unschedulable() == 0
    clock.advance(2)
    assert q.flush_unschedulable() == 1 and q.where(uid) in ("backoff", "active")


def test_update_and_delete_while_queued() -> None:
    q, _ = queue()
    p = pod("p", priority=1)
    q.add(pod("other", priority=5))
    q.add(p)
    q.update(p, {**p, "spec": {**p["spec"], "priority": 9}})  # re-sorted with its new priority
    assert names(q) == ["p", "other"]
    q.add(p)
    q.delete(p)
    assert q.pop(timeout=0) is None and q.counts() == {
        "active": 0,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 0,
    }


def test_a_pod_updated_during_its_attempt_comes_back_as_the_informer_has_it() -> None:
    """kube-scheduler requeues a failed pod with the informer's newest object; ours kept the object the
    attempt started with and parked it unschedulable, so a nodeSelector relaxed meanwhile went unseen."""
    q, _ = queue({"NodeAffinity": ()})
    p = pod("p")
    p["spec"]["nodeSelector"] = {"pool": "gone"}
    q.add(p)
    qpi = q.pop(timeout=0)
    assert qpi is not None
    relaxed = {**p, "spec": {**p["spec"], "nodeSelector": {}}}
    q.update(p, relaxed)  # while the attempt runs
    qpi.unschedulable_plugins = {"NodeAffinity"}
    q.add_unschedulable(qpi)
    assert q.where(qpi.uid) == "backoff"  # no event NodeAffinity registered would have moved it
    back = q.get(qpi.uid)
    assert back is not None and back.pod["spec"]["nodeSelector"] == {}


def test_a_status_only_update_during_the_attempt_leaves_the_pod_unschedulable_with_the_new_object() -> None:
    q, _ = queue({"Fit": ()})
    p = pod("p")
    q.add(p)
    qpi = q.pop(timeout=0)
    assert qpi is not None
    status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    q.update(p, {**p, "status": status})
    qpi.unschedulable_plugins = {"Fit"}
    q.add_unschedulable(qpi)
    assert q.where(qpi.uid) == "unschedulable"  # a status change cannot make it fit
    back = q.get(qpi.uid)
    assert back is not None and back.pod["status"] == status


FIT_ON_NODE_ADD = {"Fit": (ClusterEventWithHint(ClusterEvent(NODE, Action.ADD)),)}


def backing_off(q: SchedulingQueue, *pods: tuple[str, int]) -> list[str]:
    """These pods tried, rejected by "Fit", then moved to backoffQ by a node's addition."""
    for name, prio in pods:
        q.add(pod(name, priority=prio))
    uids = []
    for _ in pods:
        qpi = q.pop(timeout=0)
        assert qpi is not None
        qpi.unschedulable_plugins = {"Fit"}
        q.add_unschedulable(qpi)
        uids.append(qpi.uid)
    assert q.on_event(NODE_ADD, None, {}) == len(pods)
    assert {q.where(u) for u in uids} == {"backoff"}
    return uids


def test_an_idle_loop_takes_rejected_pods_from_backoff_at_once_in_active_order() -> None:
    q, clock = queue(FIT_ON_NODE_ADD)
    start = clock()
    backing_off(q, ("a", 1), ("b", 10))
    q.add(pod("new"))
    # activeQ first; then, the clock standing still, the backing-off pods in activeQ's order.
    assert names(q) == ["new", "b", "a"]
    assert clock() == start


def test_pods_backing_off_after_an_error_are_waited_out() -> None:
    q, clock = queue()
    q.add(pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    qpi.error = True
    qpi.unschedulable_plugins = {"Fit"}
    q.add_unschedulable(qpi)
    assert q.where(qpi.uid) == "backoff"
    assert q.pop(timeout=0) is None
    clock.advance(1)
    assert names(q) == ["p"]


def test_without_pop_from_backoff_an_idle_loop_waits_the_backoff_out() -> None:
    clock = FakeClock()
    q = SchedulingQueue(
        SORT.less, lambda p: None, lambda p: FIT_ON_NODE_ADD, clock=clock, pop_from_backoff=False
    )
    backing_off(q, ("a", 1))
    assert q.pop(timeout=0) is None
    clock.advance(1)
    assert names(q) == ["a"]


def test_a_pod_whose_early_attempt_failed_waits_its_backoff_out() -> None:
    q, clock = queue(FIT_ON_NODE_ADD)
    (uid,) = backing_off(q, ("a", 1))
    qpi = q.pop(timeout=0)  # early: its backoff has not run out
    assert qpi is not None and qpi.uid == uid and qpi.early
    qpi.unschedulable_plugins = {"Fit"}
    q.add_unschedulable(qpi)
    assert q.on_event(NODE_ADD, None, {}) == 1
    assert q.where(uid) == "backoff"
    assert q.pop(timeout=0) is None  # not early twice in a row: no retry loop on an idle scheduler
    clock.advance(q.backoff_duration(qpi))
    again = q.pop(timeout=0)
    assert again is not None and not again.early
