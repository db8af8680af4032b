"""The PodMigrationJob CRD (deploy/descheduler/crds): Koordinator's shape (cluster-scoped, short name pmj,
a status subresource, its printer columns), every job the descheduler writes is valid and kept whole
(nothing pruned), a user's Reservation template is kept as written, and a job without a pod is refused."""

from __future__ import annotations

from typing import Any

import yaml

from koordshared.apis.scheduling import podmigrationjob as pmj
from koordshared.testing import objects
from tests import crdschema
from tests.support.paths import ROOT

CRD = ROOT / "deploy" / "descheduler" / "crds" / "scheduling.koordinator.sh_podmigrationjobs.yaml"


def test_koordinators_shape() -> None:
    doc = yaml.safe_load(CRD.read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "podmigrationjobs.scheduling.koordinator.sh"
    assert spec["scope"] == "Cluster" and spec["names"]["shortNames"] == ["pmj"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase",
        "Status",
        "Age",
        "Node",
        "Reservation",
        "PodNamespace",
        "Pod",
        "NewPod",
        "TTL",
    ]
    assert version["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] == ["podRef"]


def written_job() -> dict[str, Any]:
    pod = objects.pod("web-1", node_name="n1")
    job = pmj.new_job(
        "j1",
        pod,
        mode="ReservationFirst",
        ttl="5m0s",
        trigger="LowNodeLoad",
        reason="node is overutilized",
        created_by="c1",
        delete_options={"gracePeriodSeconds": 30},
    )
    job["metadata"]["annotations"][pmj.ANNOTATION_PASSED_ARBITRATION] = "true"
    job["spec"]["reservationOptions"] = {
        "reservationRef": {
            "kind": "Reservation",
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "name": "r1",
            "uid": "u1",
        }
    }
    status: dict[str, Any] = {"phase": "Running"}
    for kind, state, reason in (
        ("ReservationCreated", "True", ""),
        ("ReservationScheduled", "True", ""),
        ("Eviction", "False", "Evicting"),
        ("Eviction", "True", "EvictComplete"),
        ("ReservationBound", "True", ""),
        ("BoundPodReady", "True", ""),
        ("PodBoundReservation", "True", ""),
    ):
        status = pmj.with_condition(status, kind, state, 1_700_000_000.0, reason, "a message") or status
    status.update(nodeName="n2", podRef={"namespace": "default", "name": "web-2", "uid": "u2"})
    status.update(phase="Succeeded", status="Complete", reason="", message="done")
    job["status"] = status
    return job


def test_what_the_descheduler_writes_is_valid_and_kept_whole() -> None:
    job = written_job()
    assert crdschema.errors(job, CRD) == []
    assert crdschema.prune(job, CRD) == job


def test_a_users_reservation_template_is_kept_as_written() -> None:
    job = written_job()
    template = {"metadata": {"labels": {"team": "a"}}, "spec": {"template": {"spec": {"containers": []}}}}
    job["spec"]["reservationOptions"]["template"] = template
    assert crdschema.errors(job, CRD) == []
    assert crdschema.prune(job, CRD)["spec"]["reservationOptions"]["template"] == template


def test_a_job_without_a_pod_or_with_wrong_types_is_refused() -> None:
    job = written_job()
    del job["spec"]["podRef"]
    assert crdschema.errors(job, CRD)
    job = written_job()
    job["spec"]["paused"] = "yes"
    assert crdschema.errors(job, CRD)
    job = written_job()
    job["status"]["conditions"][0].pop("type")
    assert crdschema.errors(job, CRD)
