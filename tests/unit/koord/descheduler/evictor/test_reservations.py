"""The Reservation a ReservationFirst job creates: the pod's template off its node (a node term added to
each of the pod's own terms), for its controller or, unscheduled, for itself; used once; the job's TTL; a
template the job gives kept. The job's conditions keep their transition time while their status holds and
say nothing changed when nothing did. With several profiles, which controller works on which job."""

from __future__ import annotations

from typing import Any

from koord.descheduler.evictor.args import parse_args
from koord.descheduler.evictor.jobapi import JobAPI
from koord.descheduler.evictor.jobs import Caches, JobController
from koord.descheduler.evictor.jobview import Overlay
from koord.descheduler.evictor.reservations import owners_for, reservation_for
from koord.descheduler.testing import NoEvents
from koordshared.apis.scheduling import podmigrationjob as pmj
from koordshared.testing import objects

SKIP = {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}


def job(**spec: Any) -> dict[str, Any]:
    out = pmj.new_job(
        "j1", objects.pod("p"), mode="ReservationFirst", ttl="5m0s", trigger="t", reason="r", created_by="c"
    )
    out["metadata"]["uid"] = "job-uid"
    out["spec"].update(spec)
    return out


def owned(**kw: Any) -> dict[str, Any]:
    p = objects.pod("p", node_name="n1", scheduler_name="koord-scheduler", **kw)
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    ]
    return p


def test_the_pods_template_off_its_node_for_its_controller() -> None:
    pod = owned()
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]},
                ]
            }
        }
    }
    r = reservation_for(job(), pod, 1234)
    assert r["metadata"]["name"] == "job-uid"
    assert r["metadata"]["labels"] == {
        "app.kubernetes.io/created-by": "koord-descheduler",
        "scheduling.koordinator.sh/reservation-order": "1234",
    }
    assert r["metadata"]["ownerReferences"] == [
        {
            "apiVersion": pmj.API_VERSION,
            "kind": "PodMigrationJob",
            "name": "j1",
            "uid": "job-uid",
            "controller": True,
        }
    ]
    spec = r["spec"]
    assert spec["owners"] == [
        {
            "controller": {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": "rs-uid",
                "controller": True,
                "namespace": "default",
            }
        }
    ]
    assert spec["allocateOnce"] is True and spec["ttl"] == "5m0s"
    tspec = spec["template"]["spec"]
    assert "nodeName" not in tspec and tspec["schedulerName"] == "koord-scheduler"
    terms = tspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t.get("matchFields") for t in terms] == [[SKIP], [terms[1]["matchFields"][0], SKIP]]
    assert (
        pod["spec"]["nodeName"] == "n1"
        and "matchFields"
        not in (
            pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"
            ][0]
        )
    ), "the pod itself is not changed"


def test_an_unscheduled_pod_reserves_for_itself_and_a_given_template_is_kept() -> None:
    pod = objects.pod("p", uid="pod-uid", phase="Pending")
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert owners_for(pod) == [
        {"object": {"uid": "pod-uid", "kind": "Pod", "name": "p", "namespace": "default"}}
    ]
    given = {"metadata": {"name": "mine"}, "spec": {"ttl": "1h", "owners": [{"labelSelector": {}}]}}
    r = reservation_for(job(reservationOptions={"template": given}), owned(), 0)
    assert r["metadata"]["name"] == "mine" and r["spec"]["ttl"] == "1h"
    assert r["spec"]["owners"] == [{"labelSelector": {}}]
    assert r["spec"]["template"]["spec"]["containers"]


def test_conditions_change_only_when_they_do() -> None:
    first = pmj.with_condition({}, "Eviction", "False", 100.0, "Evicting", "m")
    assert first is not None
    assert (first["status"], first["reason"], first["message"]) == ("Eviction", "Evicting", "m")
    assert pmj.with_condition(first, "Eviction", "False", 200.0, "Evicting", "m") is None
    again = pmj.with_condition(first, "Eviction", "False", 200.0, "Evicting", "other")
    assert (
        again is not None
        and again["conditions"][0]["lastTransitionTime"] == first["conditions"][0]["lastTransitionTime"]
    )
    done = pmj.with_condition(first, "Eviction", "True", 300.0, "EvictComplete")
    assert (
        done is not None
        and done["conditions"][0]["lastTransitionTime"] != first["conditions"][0]["lastTransitionTime"]
    )
    assert len(done["conditions"]) == 1


def test_trigger_reason_and_ttl() -> None:
    j = job()
    j["metadata"]["annotations"] = {pmj.ANNOTATION_EVICT_TRIGGER: "LowNodeLoad"}
    assert pmj.trigger_and_reason(j) == ("LowNodeLoad", "LowNodeLoad")
    j["metadata"]["annotations"] = {}
    assert pmj.trigger_and_reason(j) == ("", "NotSet")
    assert pmj.ttl_seconds(j) == 300.0 and pmj.ttl_seconds(job(ttl="0s")) == 0.0


def test_with_several_profiles_each_controller_works_on_its_own_jobs_and_the_first_on_the_rest() -> None:
    siblings: list[JobController] = []

    def make() -> JobController:
        return JobController(
            parse_args(None),
            api=JobAPI(None),
            caches=Caches(
                pod=lambda _k: None, jobs=Overlay(lambda: None), reservations=Overlay(lambda: None)
            ),
            limits=None,  # type: ignore[arg-type]
            static=None,  # type: ignore[arg-type]
            recorder=NoEvents(),
            wall=lambda: 0.0,
            monotonic=lambda: 0.0,
            siblings=siblings,
        )

    first, second = make(), make()

    def by(uid: str | None) -> dict[str, Any]:
        j = job()
        j["metadata"]["annotations"] = {pmj.ANNOTATION_CREATED_BY: uid} if uid else {}
        return j

    assert [first.claims(by(second.uid)), second.claims(by(second.uid))] == [False, True]
    assert [first.claims(by(first.uid)), second.claims(by(first.uid))] == [True, False]
    for other in (None, "a-former-leader"):
        assert [first.claims(by(other)), second.claims(by(other))] == [True, False]
