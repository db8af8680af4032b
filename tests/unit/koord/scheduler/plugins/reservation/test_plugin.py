"""Reservation end to end in memory (MemoryScheduler on Koordinator's profile for the plugin): a reservation
is scheduled as its reserve pod and becomes Available; its room is its owners' and no one else's; an
allocate-once one is Succeeded after its first owner and its leftover room returns to the node; the node
never counts an owner and the room it sits in twice; Aligned and Restricted; owners, affinities and the
nomination order (the lifecycle is in ``test_reservation_lifecycle.py``)."""

from __future__ import annotations

from koordshared.apis.scheduling import reservation as rsv
from koordshared.testing.reservations import available, owner_labels, owner_pod, reservation
from tests.support.scheduler.reservationkit import (
    add,
    allocated_to,
    condition,
    get,
    kit,
    node_requested,
    owner,
    phase,
)

WEB = {"app": "web"}


def messages(k: object, name: str) -> list[str]:
    return [e[3] for e in k.events("FailedScheduling") if e[0] == f"default/{name}"]  # type: ignore[attr-defined]


def test_a_pending_reservation_is_placed_as_its_reserve_pod_and_becomes_available() -> None:
    k = kit({"a": "4", "b": "2"})
    add(k, reservation("r1", {"cpu": "3"}, owners=[owner_labels(WEB)]))
    k.run()
    r = get(k, "r1")
    assert rsv.phase_of(r) == "Available" and rsv.node_of(r) == "a"  # only a has 3 cpus
    assert r["status"]["allocatable"] == {"cpu": "3"}
    assert [(c["type"], c["status"], c["reason"]) for c in r["status"]["conditions"]] == [
        ("Scheduled", "True", "Scheduled"),
        ("Ready", "True", "Available"),
    ]
    # Written on the status subresource, and no pod was bound, patched or reported.
    assert [p[0] for p in k.api.object_patches] == ["reservations/status"]
    assert k.bound() == {} and k.api.patches == {} and k.api.statuses == {}
    assert ("/r1", "Normal", "Scheduled", "Successfully assigned r1 to a") in k.events()
    # Its reserve pod holds the room on a, as a bound pod does.
    assert node_requested(k, "a") == 3000
    assert k.cache.counts() == (2, 1, 0)


def test_the_room_is_the_owners_and_no_one_elses_then_succeeded_returns_the_rest() -> None:
    k = kit({"a": "4"})
    add(k, reservation("r1", {"cpu": "3"}, owners=[owner_labels(WEB)]))
    k.run()
    k.add_pod(owner("other", "2"))
    k.run()
    assert k.bound() == {}  # 1 cpu is free: the other 3 are r1's
    assert messages(k, "other")[0].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    k.add_pod(owner("web", "2", WEB))
    k.run()
    assert k.bound() == {"default/web": "a"} and allocated_to(k, "web") == "r1"
    k.reconcile()
    r = get(k, "r1")
    assert rsv.phase_of(r) == "Succeeded"
    web = k.pods.get("default/web")
    assert web is not None
    assert r["status"]["currentOwners"] == [
        {"namespace": "default", "name": "web", "uid": web["metadata"]["uid"]}
    ]
    assert r["status"]["allocated"] == {"cpu": "2"}
    assert condition(k, "r1", "Ready")["reason"] == "Succeeded"
    # Allocate-once: r1's leftover cpu is the node's again, so "other" fits now; a second owner gets no room.
    assert node_requested(k, "a") == 2000
    k.clock.advance(30)
    k.add_pod(owner("web2", "1", WEB))
    k.run()
    assert k.bound()["default/other"] == "a"
    assert "default/web2" not in k.bound() and allocated_to(k, "web2") == ""


def test_an_allocate_once_reservation_with_an_owner_takes_no_second_before_its_status_says_so() -> None:
    k = kit({"a": "8"})
    add(k, reservation("r1", {"cpu": "4"}, owners=[owner_labels(WEB)]))
    k.run()
    k.add_pod(owner("web1", "2", WEB))
    k.add_pod(owner("web2", "2", WEB))
    k.run()  # no reconcile between: r1 is still Available when web2 is scheduled
    assert allocated_to(k, "web1") == "r1" and allocated_to(k, "web2") == ""
    assert k.bound() == {"default/web1": "a", "default/web2": "a"}


def test_the_node_never_counts_an_owner_and_the_room_it_sits_in_twice() -> None:
    k = kit({"a": "8"})
    add(k, reservation("r1", {"cpu": "4"}, owners=[owner_labels(WEB)], allocate_once=False))
    k.run()
    k.add_pod(owner("web1", "2", WEB))
    k.run()
    k.reconcile()
    assert phase(k, "r1") == "Available" and get(k, "r1")["status"]["allocated"] == {"cpu": "2"}
    # The cache holds the reserve pod (4) and the owner (2); the owner is inside the 4.
    assert node_requested(k, "a") == 6000
    k.add_pod(owner("big", "4"))  # a non-owner: 8 - 4 is free
    k.run()
    assert k.bound()["default/big"] == "a"
    k.add_pod(owner("web2", "2", WEB))  # the reservation's other 2
    k.add_pod(owner("more", "1"))
    k.run()
    assert allocated_to(k, "web2") == "r1" and k.bound()["default/web2"] == "a"
    assert "default/more" not in k.bound()


def test_aligned_takes_what_the_reservation_lacks_from_the_node_restricted_does_not() -> None:
    affinity = {rsv.ANNOTATION_RESERVATION_AFFINITY: "{}"}
    for policy, placed in (("Aligned", True), ("Restricted", False)):
        k = kit({"a": "8"})
        add(k, reservation("r1", {"cpu": "2"}, owners=[owner_labels(WEB)], policy=policy))
        k.run()
        k.add_pod(owner("web", "3", WEB, annotations=affinity))
        k.run()
        assert ("default/web" in k.bound()) is placed, policy
        if not placed:
            (msg,) = messages(k, "web")
            assert "1 Reservation(s) Insufficient cpu" in msg, msg
            assert "1 Reservation(s) matched owner total" in msg, msg
            k.add_pod(owner("web-fits", "2", WEB, annotations=affinity))
            k.run()
            assert allocated_to(k, "web-fits") == "r1"
        else:
            assert allocated_to(k, "web") == "r1"


def test_restricted_without_affinity_leaves_the_reservation_and_uses_the_node() -> None:
    k = kit({"a": "8"})
    add(k, reservation("r1", {"cpu": "2"}, owners=[owner_labels(WEB)], policy="Restricted"))
    k.run()
    k.add_pod(owner("web", "3", WEB))
    k.run()
    assert k.bound() == {"default/web": "a"} and allocated_to(k, "web") == ""
    assert phase(k, "r1") == "Available"


def test_restricted_options_limit_only_the_resources_they_name() -> None:
    k = kit({"a": "8"})
    options = {rsv.ANNOTATION_RESTRICTED_OPTIONS: '{"resources": ["cpu"]}'}
    r = reservation(
        "r1",
        {"cpu": "2", "memory": "1Gi"},
        owners=[owner_labels(WEB)],
        policy="Restricted",
        annotations=options,
    )
    add(k, r)
    k.run()
    web = owner("web", "2", WEB, annotations={rsv.ANNOTATION_RESERVATION_AFFINITY: "{}"})
    web["spec"]["containers"][0]["resources"]["requests"]["memory"] = "4Gi"  # more than held: from the node
    k.add_pod(web)
    k.run()
    assert allocated_to(k, "web") == "r1"


def test_a_node_with_a_reservation_for_the_pod_wins_over_an_emptier_one() -> None:
    k = kit({"a": "16", "b": "16"})
    add(k, available(reservation("r1", {"cpu": "2"}, owners=[owner_labels(WEB)]), "b"))
    k.add_pod(owner("filler", "8", node_name="b"))
    k.add_pod(owner("web", "1", WEB))
    k.run()
    assert k.bound() == {"default/web": "b"} and allocated_to(k, "web") == "r1"


def test_nomination_takes_the_lowest_order_then_the_fullest_fit() -> None:
    k = kit({"a": "16"})
    order = rsv.LABEL_RESERVATION_ORDER
    big = reservation("big", {"cpu": "8"}, owners=[owner_labels(WEB)], labels={order: "1"})
    small = reservation("small", {"cpu": "2"}, owners=[owner_labels(WEB)], labels={order: "2"})
    for r in (big, small):
        add(k, available(r, "a"))
    k.add_pod(owner("web1", "2", WEB))
    k.run()
    assert allocated_to(k, "web1") == "big"  # order 1 before order 2, however it fits
    for r in (big, small):  # without orders: the one the pod fills most (most allocated)
        r["metadata"]["labels"] = {}
        add(k, available(r, "a"))
    k.add_pod(owner("web2", "2", WEB))
    k.run()
    assert allocated_to(k, "web2") == "small"


def test_the_node_with_the_lowest_ordered_reservation_is_preferred() -> None:
    k = kit({"a": "16", "b": "16"})
    order = rsv.LABEL_RESERVATION_ORDER
    add(k, available(reservation("ra", {"cpu": "1"}, labels={order: "5"}), "a"))
    add(k, available(reservation("rb", {"cpu": "4"}, labels={order: "2"}), "b"))
    k.add_pod(owner("p", "1"))
    k.run()
    assert k.bound() == {"default/p": "b"} and allocated_to(k, "p") == "rb"


def test_owners_by_object_and_by_controller() -> None:
    k = kit({"a": "4"})
    add(k, available(reservation("mine", {"cpu": "3"}, owners=[owner_pod("web")]), "a"))
    k.add_pod(owner("not-web", "2"))
    k.add_pod(owner("web", "2"))
    k.run()
    assert k.bound() == {"default/web": "a"}
    k2 = kit({"a": "4"})
    ctl = {"controller": {"kind": "ReplicaSet", "name": "owner", "apiVersion": "apps/v1"}}
    add(k2, available(reservation("rs", {"cpu": "3"}, owners=[ctl]), "a"))
    k2.add_pod(owner("by-rs", "2", owner_kind="ReplicaSet"))
    k2.add_pod(owner("by-job", "2", owner_kind="Job"))
    k2.run()
    assert k2.bound() == {"default/by-rs": "a"} and allocated_to(k2, "by-rs") == "rs"


def test_a_reservation_ignored_pod_may_take_any_reserved_room() -> None:
    k = kit({"a": "4"})
    add(k, available(reservation("r1", {"cpu": "3"}, owners=[owner_labels(WEB)]), "a"))
    k.add_pod(owner("ignoring", "3", {rsv.LABEL_RESERVATION_IGNORED: "true"}))
    k.run()
    assert k.bound() == {"default/ignoring": "a"} and allocated_to(k, "ignoring") == ""


def test_reservation_affinity_by_name_selector_taints_and_unschedulable() -> None:
    k = kit({"a": "16"})
    taint = {"key": "gpu", "value": "x", "effect": "NoSchedule"}
    tainted = reservation("tainted", {"cpu": "2"}, taints=[taint], allocate_once=False)
    closed = reservation("closed", {"cpu": "2"}, unschedulable=True, labels={"pool": "p"})
    open_ = reservation("open", {"cpu": "2"}, labels={"pool": "p"}, allocate_once=False)
    for r in (tainted, closed, open_):
        add(k, available(r, "a"))

    def aff(doc: str) -> dict[str, str]:
        return {rsv.ANNOTATION_RESERVATION_AFFINITY: doc}

    k.add_pod(owner("by-name", "1", annotations=aff('{"name": "tainted"}')))
    k.add_pod(owner("by-selector", "1", annotations=aff('{"reservationSelector": {"pool": "p"}}')))
    k.run()
    assert allocated_to(k, "by-name") == "tainted"  # a name is enough: no taint or schedulability check
    assert allocated_to(k, "by-selector") == "open"  # closed is unschedulable
    k.add_pod(owner("no-match", "1", annotations=aff('{"reservationSelector": {"pool": "q"}}')))
    k.run()
    (msg,) = messages(k, "no-match")
    assert msg.startswith("0/1 nodes are available: node(s) no reservations match reservation affinity.")
    tolerating = aff('{"tolerations": [{"key": "gpu", "operator": "Exists"}], "reservationSelector": {}}')
    k.add_pod(owner("tolerates", "1", annotations=tolerating))
    k.run()
    assert allocated_to(k, "tolerates") in ("tainted", "open")


def test_a_malformed_reservation_affinity_is_refused_with_a_clear_message() -> None:
    k = kit({"a": "16"})
    add(k, available(reservation("r1", {"cpu": "2"}), "a"))
    k.add_pod(owner("bad", "1", annotations={rsv.ANNOTATION_RESERVATION_AFFINITY: "{not json"}))
    k.run()
    (msg,) = messages(k, "bad")
    assert rsv.ANNOTATION_RESERVATION_AFFINITY in msg and "not JSON" in msg, msg


def test_owners_seen_before_their_reservation_still_count() -> None:
    k = kit({"a": "8"})
    r = available(reservation("r1", {"cpu": "4"}, owners=[owner_labels(WEB)], allocate_once=False), "a")
    placed = owner("web", "2", WEB, node_name="a")
    placed["metadata"]["annotations"] = {
        rsv.ANNOTATION_RESERVATION_ALLOCATED: rsv.allocated_annotation("r1", r["metadata"]["uid"])
    }
    k.add_pod(placed)
    add(k, r)
    k.add_pod(owner("big", "4"))
    k.run()
    assert k.bound() == {"default/big": "a"}  # 8 - 4 held (the owner inside): no double count


def test_preemption_counts_what_the_victims_free_outside_and_inside_a_reservation() -> None:
    k = kit({"a": "4"})
    add(k, available(reservation("r1", {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False), "a"))
    k.add_pod(owner("low", "2", node_name="a", priority=1))  # beside the reservation: the node is full
    k.add_pod(owner("web", "3", WEB, priority=100))  # 2 from r1, 1 from the node: only with "low" gone
    k.run()
    assert k.api.deleted == ["default/low"]
    assert k.scheduler.nominator.pods_for_node("a")[0].name == "web"

    k = kit({"a": "8"})
    r = reservation("r2", {"cpu": "2"}, owners=[owner_labels(WEB)], allocate_once=False, policy="Restricted")
    add(k, available(r, "a"))
    placed = owner("in-r2", "2", WEB, node_name="a", priority=1)
    placed["metadata"]["annotations"] = {
        rsv.ANNOTATION_RESERVATION_ALLOCATED: rsv.allocated_annotation("r2", r["metadata"]["uid"])
    }
    k.add_pod(placed)
    aff = {rsv.ANNOTATION_RESERVATION_AFFINITY: "{}"}
    k.add_pod(owner("urgent", "2", WEB, priority=100, annotations=aff))  # r2 is full: only its owner's room
    k.run()
    assert k.api.deleted == ["default/in-r2"]


def test_rows_restored_for_a_cycle_get_their_node_infos_back_without_copying_the_nodes() -> None:
    k = kit({f"n{i}": "16" for i in range(6)})
    for i in range(6):
        add(k, available(reservation(f"r{i}", {"cpu": "2"}, owners=[owner_labels(WEB)]), f"n{i}"))
    k.cache.update_snapshot(k.snapshot)
    before = {ni.name: ni for ni in k.snapshot.node_infos()}
    # An owner too big for any node: its cycle gives it back the room of the reservation on every node,
    # then fails, and nothing in the cache changes.
    k.add_pod(owner("big", "64", WEB))
    assert k.scheduler.schedule_next(timeout=0)
    assert all(k.snapshot.node_info(n) is not before[n] for n in before)
    # The next update copies no node (it copied all six): each row gets its own NodeInfo back.
    assert k.cache.update_snapshot(k.snapshot) == 0
    assert all(k.snapshot.node_info(n) is before[n] for n in before)
    assert all(ni.requested.get("cpu") == 2000 for ni in before.values())  # the reserve pods' room
