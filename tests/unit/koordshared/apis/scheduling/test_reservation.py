"""The Reservation API helpers, case by case from Koordinator's ``pkg/util/reservation`` and
``frameworkext/reservation_info.go`` tests: owner matching (a DNF of object, controller and label
selector), the reserve pod built from a reservation, the pod's annotations, the ReservationInfo
arithmetic, and the status transitions."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework import PodInfo, PodRequirement, ReservationInfo
from koord.scheduler.plugins.reservation import status
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import (
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    MAX_PRIORITY,
    is_reserve_pod,
    reserve_pod,
)
from koordshared.runtime.errors import InvalidValue
from koordshared.testing import pod
from koordshared.testing.reservations import available, owner_labels, owner_pod, reservation


def web(name: str = "web", **kw: Any) -> dict[str, Any]:
    return pod(name, requests={"cpu": "1", "memory": "1Gi"}, labels={"app": "web"}, **kw)


@pytest.mark.parametrize(
    ("owners", "matches"),
    [
        ([], False),  # no owners match nothing
        ([{}], True),  # an empty owner matches everything
        ([owner_labels({"app": "web"})], True),
        ([owner_labels({"app": "db"})], False),
        ([owner_labels({"app": "db"}), owner_pod("web")], True),  # owners are ORed
        ([{**owner_pod("web"), **owner_labels({"app": "db"})}], False),  # fields inside one are ANDed
        ([{"object": {"name": "web", "namespace": "other"}}], False),
        ([{"controller": {"kind": "ReplicaSet"}}], True),
        ([{"controller": {"kind": "ReplicaSet", "namespace": "other"}}], False),
        ([{"controller": {"kind": "Job"}}], False),
        ([{"controller": {"controller": True}}], False),  # the builder's reference sets no controller
    ],
)
def test_owner_matching(owners: list[dict[str, Any]], matches: bool) -> None:
    parsed, error = rsv.parse_owners(owners)
    assert error == ""
    p = web(owner_kind="ReplicaSet")
    assert any(o.matches(p) for o in parsed) is matches


def test_a_bad_owner_selector_is_a_problem_and_matches_no_pod() -> None:
    r = reservation("r", {"cpu": "1"})
    r["spec"]["owners"] = [{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]
    assert rsv.problems(r)[0].startswith("spec.owners[0].labelSelector")
    info = ReservationInfo.of(available(r, "n"))
    assert info.parse_error and not info.match_owners(web()) and not info.is_matchable()
    r["spec"]["owners"] = []
    del r["spec"]["template"]
    assert rsv.problems(r) == [
        "the reservation misses the template spec",
        "the reservation misses the owner spec",
    ]


def test_the_reserve_pod() -> None:
    r = reservation("r1", {"cpu": "2"}, node_name="n1", labels={"team": "a"}, uid="u1")
    r["spec"]["template"]["metadata"] = {"namespace": "apps", "labels": {"team": "t", "tier": "x"}}
    p = reserve_pod(r)
    meta = p["metadata"]
    assert (meta["name"], meta["namespace"], meta["uid"]) == ("u1", "apps", "u1")
    assert meta["labels"] == {"team": "a", "tier": "x"}  # the reservation's labels over the template's
    assert is_reserve_pod(p) and meta["annotations"][ANNOTATION_RESERVATION_NAME] == "r1"
    assert meta["annotations"][ANNOTATION_RESERVATION_NODE] == "n1" and "nodeName" not in p["spec"]
    assert p["spec"]["priority"] == MAX_PRIORITY and p["spec"]["schedulerName"] == "koord-scheduler"
    r["metadata"]["labels"][rsv.LABEL_POD_PRIORITY] = "7"
    assert reserve_pod(r)["spec"]["priority"] == 7
    placed = reserve_pod(available(r, "n1", {"cpu": "3"}))  # reserved more than the template asks
    assert placed["spec"]["nodeName"] == "n1"
    assert PodInfo(placed).requests == {"cpu": 3000}
    assert reserve_pod({**r, "status": {"phase": "Succeeded"}})["status"]["phase"] == "Succeeded"


def test_reservation_affinity_and_annotations() -> None:
    annotations = {
        rsv.ANNOTATION_RESERVATION_AFFINITY: (
            '{"reservationSelector": {"pool": "p"}, "requiredDuringSchedulingIgnoredDuringExecution": '
            '{"reservationSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", '
            '"values": ["z1"]}]}]}, "tolerations": [{"key": "node.kubernetes.io/unschedulable", '
            '"operator": "Exists"}]}'
        )
    }
    aff = rsv.reservation_affinity(web(annotations=annotations))
    assert aff is not None and aff.tolerates_unschedulable
    assert aff.matches("r", {"pool": "p", "zone": "z1"}) and not aff.matches("r", {"pool": "p"})
    assert rsv.reservation_affinity(web()) is None
    assert rsv.reservation_affinity(web(annotations={rsv.ANNOTATION_RESERVATION_AFFINITY: ""})) is not None
    with pytest.raises(InvalidValue, match="want a JSON object"):
        rsv.reservation_affinity(web(annotations={rsv.ANNOTATION_RESERVATION_AFFINITY: "[]"}))
    assert rsv.allocated_of(web()) is None
    placed = web(annotations={rsv.ANNOTATION_RESERVATION_ALLOCATED: rsv.allocated_annotation("r", "u")})
    assert rsv.allocated_of(placed) == ("r", "u")
    assert rsv.is_ignored(pod("p", labels={rsv.LABEL_RESERVATION_IGNORED: "true"}))


def test_exact_match() -> None:
    assert rsv.exact_match({"cpu": 1000}, {"cpu": 1000}, ["cpu"])
    assert not rsv.exact_match({"cpu": 1000}, {"cpu": 2000}, ["cpu"])
    assert not rsv.exact_match({"cpu": 1000}, {}, ["cpu"])
    assert rsv.exact_match({}, {}, ["gpu", "cpu"])  # both absent: the check ends, a match


def test_ttl_and_expiry() -> None:
    r = reservation("r", {"cpu": "1"})
    assert rsv.expires_at(r, 100.0) == 100.0 + 86400
    assert rsv.expires_at({**r, "spec": {**r["spec"], "ttl": "0"}}, 100.0) is None
    assert rsv.expires_at(reservation("r", {"cpu": "1"}, ttl="30m", expires=50.0), 100.0) == 50.0
    with pytest.raises(InvalidValue):
        rsv.ttl_seconds(reservation("r", {"cpu": "1"}, ttl="a day"))


def test_reservation_info_arithmetic() -> None:
    r = available(
        reservation("r", {"cpu": "4", "memory": "4Gi"}, policy="Restricted", allocate_once=False), "n"
    )
    r["metadata"]["annotations"] = {
        rsv.ANNOTATION_RESTRICTED_OPTIONS: '{"resources": ["cpu"]}',
        rsv.ANNOTATION_NODE_RESERVED: '{"resources": {"cpu": "1"}}',
    }
    info = ReservationInfo.of(r)
    assert info.resource_names == ("cpu",) and info.reserved == {"cpu": 1000}
    owner = PodRequirement.of(PodInfo(web()))
    with_owner = info.with_pod(owner)
    assert with_owner.allocated == {"cpu": 1000}  # only the restricted resources count
    assert with_owner.available == {"cpu": 2000, "memory": 4 * 2**30}
    assert with_owner.non_zero_allocated() == (1000, 200 * 2**20)
    assert with_owner.with_pod(owner) is with_owner and with_owner.without_pod("x") is with_owner
    assert with_owner.without_pod(owner.uid).allocated == {} and info.non_zero_allocated() == (0, 0)
    assert with_owner.is_matchable()  # reusable
    once = ReservationInfo.of(available(reservation("o", {"cpu": "1"}), "n")).with_pod(owner)
    assert not once.is_matchable()


def test_status_transitions() -> None:
    r = reservation("r", {"cpu": "1"}, uid="u")
    r["metadata"]["resourceVersion"] = "7"
    patch = status.available(r, "n", {"cpu": 1500, "memory": 2**30}, 0.0)
    assert patch["metadata"] == {"uid": "u", "resourceVersion": "7"}
    assert patch["status"]["allocatable"] == {"cpu": "1500m", "memory": "1Gi"}
    failed = status.unschedulable(r, "no room", 0.0)
    assert failed is not None
    (cond,) = failed["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "Scheduled",
        "False",
        "Unschedulable",
        "no room",
    )
    again = {**r, "status": failed["status"]}
    assert status.unschedulable(again, "no room", 1.0) is None  # the same message once
    placed = {**r, "status": patch["status"]}
    assert status.unschedulable(placed, "late", 1.0) is None  # a placed reservation keeps Scheduled=True
    expired = status.expired(placed, 2.0)["status"]
    assert expired["phase"] == "Failed"
    assert [c["reason"] for c in expired["conditions"]] == ["Scheduled", "Expired"]
    done = status.owners(placed, [{"namespace": "d", "name": "p", "uid": "x"}], {"cpu": 1000}, 3.0)["status"]
    assert done["phase"] == "Succeeded" and done["allocated"] == {"cpu": "1"}
    assert rsv.phase_of({**placed, "status": done}) == "Succeeded"
    assert status.ended_at({**placed, "status": done}) == done["conditions"][1]["lastProbeTime"]
