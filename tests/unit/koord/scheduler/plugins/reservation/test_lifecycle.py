"""A Reservation's life in memory (MemoryScheduler on Koordinator's profile for the plugin): expiry by TTL
or ``expires`` (a pending one too), garbage collection, a deleted node, a reservation that cannot be
placed or used and says so on itself, a pinned one, a binding that fails after PreBind, reserve pods never
reported as pods, and several profiles sharing the reservations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordshared.apis.meta import groups
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import ANNOTATION_RESERVE_POD
from koordshared.testing import node
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.scheduler.reservationkit import (
    add,
    allocated_to,
    condition,
    get,
    kit,
    owner,
    phase,
)

WEB = {"app": "web"}


def test_an_expired_reservation_is_released_and_collected_a_day_later() -> None:
    k = kit({"a": "4"})
    add(k, reservation("r1", {"cpu": "3"}, owners=[owner_labels(WEB)], ttl="10m"))
    k.run()
    k.reconcile()
    k.add_pod(owner("other", "2"))
    k.run()
    assert k.bound() == {}
    k.clock.advance(601)
    k.reconcile()
    assert phase(k, "r1") == "Failed"
    assert {**condition(k, "r1", "Ready"), "lastProbeTime": "", "lastTransitionTime": ""} == {
        "type": "Ready",
        "status": "False",
        "reason": "Expired",
        "lastProbeTime": "",
        "lastTransitionTime": "",
    }
    k.run()
    assert k.bound() == {"default/other": "a"}  # the room came back
    k.clock.advance(86400 - 1)
    k.reconcile()
    assert k.api.deleted_objects == []
    k.clock.advance(2)
    k.reconcile()
    assert k.api.deleted_objects == [("reservations", "", "r1")]
    assert k.informers["reservations"].get("r1") is None


def test_expires_wins_over_ttl_and_a_zero_ttl_never_expires() -> None:
    k = kit({"a": "8"})
    now = k.clock.wall()
    add(k, reservation("soon", {"cpu": "1"}, ttl="24h", expires=now + 60, created=now))
    add(k, reservation("never", {"cpu": "1"}, ttl="0s", created=now - 10 * 86400))
    k.run()
    k.clock.advance(61)
    k.reconcile()
    assert phase(k, "soon") == "Failed" and phase(k, "never") == "Available"


def test_a_pending_reservation_expires_too() -> None:
    k = kit({"a": "1"})
    add(k, reservation("r1", {"cpu": "3"}, ttl="1m"))
    k.run()
    assert phase(k, "r1") == "Pending"
    k.clock.advance(61)
    k.reconcile()
    assert phase(k, "r1") == "Failed"
    k.add_node(node("big", "8", "16Gi"))
    k.clock.advance(30)
    k.run()
    assert rsv.node_of(get(k, "r1")) == ""  # out of the queue: never placed after its time


def test_an_unplaceable_reservation_says_why_and_is_placed_when_room_comes() -> None:
    k = kit({"a": "2"})
    add(k, reservation("r1", {"cpu": "3"}))
    k.run()
    scheduled = condition(k, "r1", "Scheduled")
    assert scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert ("/r1", "Warning", "FailedScheduling", scheduled["message"]) in k.events()
    assert phase(k, "r1") == "Pending"
    assert k.api.statuses == {}  # the reserve pod is no pod: nothing written about it
    k.add_node(node("b", "4", "16Gi"))
    k.clock.advance(30)
    k.run()
    assert rsv.node_of(get(k, "r1")) == "b" and phase(k, "r1") == "Available"
    assert condition(k, "r1", "Scheduled")["status"] == "True"


def test_an_invalid_reservation_is_told_why_instead_of_waiting_silently() -> None:
    k = kit({"a": "8"})
    r = reservation("r1", {"cpu": "1"})
    r["spec"]["owners"] = [{"labelSelector": {"matchExpressions": [{"key": "x", "operator": "Bogus"}]}}]
    add(k, r)
    k.run()
    message = condition(k, "r1", "Scheduled")["message"]
    assert message.startswith("0/1 nodes are available: reservation r1 cannot be used: spec.owners[0]")


def test_a_reservation_pinned_to_a_node_goes_there_only() -> None:
    k = kit({"a": "8", "b": "8"})
    k.add_pod(owner("filler", "8", node_name="a"))
    add(k, reservation("r1", {"cpu": "1"}, node_name="b"))
    add(k, reservation("r2", {"cpu": "1"}, node_name="a"))
    k.run()
    assert rsv.node_of(get(k, "r1")) == "b"
    assert condition(k, "r2", "Scheduled")["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match the nodeName specified by reservation."
    )


def test_a_deleted_node_fails_its_reservations_which_are_collected_at_once() -> None:
    k = kit({"a": "8"})
    add(k, reservation("r1", {"cpu": "1"}))
    k.run()
    k.nodes.remove("a")
    k.reconcile()
    assert k.informers["reservations"].get("r1") is None
    assert k.api.deleted_objects == [("reservations", "", "r1")]
    statuses = [p[3]["status"] for p in k.api.object_patches if p[2] == "r1"]
    assert statuses[-1]["phase"] == "Failed"


def test_a_failed_binding_takes_the_owner_out_of_the_reservation_again() -> None:
    k = kit({"a": "4"})
    add(k, available(reservation("r1", {"cpu": "3"}, owners=[owner_labels(WEB)]), "a"))
    k.api.fail_bind = lambda pod, node: "the API server said no"
    k.add_pod(owner("web", "2", WEB))
    k.run()
    assert k.bound() == {}
    info = k.scheduler.profiles["koord-scheduler"].instances["Reservation"].cache.on_node("a")[0]
    assert info.allocated_pods == 0
    (removed,) = [p[3] for p in k.api.object_patches if p[:3] == ("pods", "default", "web")]
    assert removed == {"metadata": {"annotations": {rsv.ANNOTATION_RESERVATION_ALLOCATED: None}}}
    assert allocated_to(k, "web") == ""


def test_reserve_pods_are_never_reported_as_pods() -> None:
    k = kit({"a": "1"})
    add(k, reservation("r1", {"cpu": "3"}))
    k.run()
    assert k.api.statuses == {} and not any(e[0].startswith("default/") for e in k.events())
    (pod_key,) = k.scheduler.virtual_pods
    assert k.scheduler.virtual_pods[pod_key]["metadata"]["annotations"][ANNOTATION_RESERVE_POD] == "true"


def test_profiles_share_one_reservation_cache_and_each_reservation_is_scheduled_once() -> None:
    from koord.scheduler.testing import MemoryScheduler
    from koordshared.testing import FakeClock
    from tests.support.scheduler.reservationkit import profile

    second = {**profile(), "schedulerName": "other"}
    k = MemoryScheduler({"profiles": [profile(), second]}, clock=FakeClock())
    k.add_node(node("a", "4", "16Gi"))
    r = reservation(
        "r1", {"cpu": "3"}, owners=[owner_labels(WEB)], scheduler_name="other", allocate_once=False
    )
    add(k, r)
    assert len(k.scheduler.virtual_pods) == 1 and k.scheduler.queue.counts()["active"] == 1
    assert k.run() == 1
    assert phase(k, "r1") == "Available"
    k.add_pod(owner("web", "3", WEB))  # koord-scheduler's pod in the reservation other placed
    k.run()
    assert allocated_to(k, "web") == "r1"
    mine = k.scheduler.profiles["koord-scheduler"].instances["Reservation"]
    theirs = k.scheduler.profiles["other"].instances["Reservation"]
    assert mine.cache is theirs.cache
    (info,) = mine.cache.on_node("a")
    assert info.uid == r["metadata"]["uid"] and info.allocated_pods == 1


def test_a_low_priority_reservation_is_never_deleted_as_a_preemption_victim() -> None:
    k = kit({"a": "4"})
    r = reservation("low", {"cpu": "4"}, owners=[owner_labels(WEB)])
    r["spec"]["template"]["spec"]["priority"] = 0
    add(k, r)
    k.run()
    assert phase(k, "low") == "Available"
    k.add_pod(owner("urgent", "2", {"not": "an-owner"}, priority=1000))
    k.run()
    assert k.api.deleted == [] and k.bound() == {} and phase(k, "low") == "Available"
    assert [e[3] for e in k.events("FailedScheduling") if e[0] == "default/urgent"]


def test_an_owner_finds_the_reservation_its_scheduler_made_available_before_the_watch_tells_it() -> None:
    k = kit({"a": "4", "b": "4"})
    late: list[Mapping[str, Any]] = []
    recorded = k.api.patch_object

    def unseen(resource: groups.Resource, namespace: str, name: str, patch: Any, **kw: Any) -> None:
        if resource != groups.RESERVATIONS:
            recorded(resource, namespace, name, patch, **kw)
            return
        type(k.api).patch_object(k.api, resource, namespace, name, patch, **kw)
        late.append(patch)  # on the server, not yet back through the reservations' watch

    k.api.patch_object = unseen  # type: ignore[method-assign]
    add(k, reservation("hold", {"cpu": "2"}, owners=[owner_labels(WEB)]))
    k.run()
    assert phase(k, "hold") != "Available" and late and late[-1]["status"]["phase"] == "Available"
    k.add_pod(owner("web", "2", WEB))
    k.run()
    assert allocated_to(k, "web") == "hold"
