"""The Reservation CRD (deploy/scheduler/crds): generated from its script, Koordinator's shape
(cluster-scoped, a status subresource, its defaults and printer columns), and it accepts what users and
koord-scheduler write (the test builders, every status transition), refusing wrong types and owners
without a field."""

from __future__ import annotations

import yaml

from koord.scheduler.plugins.reservation import status
from koordshared.apis.scheduling.reservation import reserve_pod
from koordshared.testing.reservations import available, owner_labels, owner_pod, reservation
from tests import crdschema
from tests.support.paths import ROOT

CRDS = ROOT / "deploy" / "scheduler" / "crds"
CRD = CRDS / "scheduling.koordinator.sh_reservations.yaml"


def test_koordinators_shape() -> None:
    doc = yaml.safe_load(CRD.read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "reservations.scheduling.koordinator.sh"
    assert spec["scope"] == "Cluster" and spec["names"]["kind"] == "Reservation"
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase",
        "Age",
        "Node",
        "TTL",
        "Expires",
    ]
    props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert props["required"] == ["owners", "template"]
    assert props["properties"]["ttl"]["default"] == "24h"
    assert props["properties"]["allocateOnce"]["default"] is True


def test_what_users_and_the_scheduler_write_is_valid() -> None:
    r = reservation(
        "r",
        {"cpu": "2", "memory": "4Gi"},
        owners=[owner_labels({"app": "web"}), owner_pod("p")],
        ttl="1h",
        expires=1_800_000_000.0,
        allocate_once=False,
        policy="Restricted",
        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
        node_name="n1",
        host_port=8080,
    )
    assert crdschema.errors(r, CRD) == []
    placed = available(r, "n1")
    r["metadata"]["resourceVersion"] = "1"
    for patch in (
        status.available(r, "n1", {"cpu": 2000, "memory": 4 * 2**30}, 0.0),
        status.unschedulable(r, "0/1 nodes are available", 0.0),
        status.expired(placed, 0.0),
        status.owners(placed, [{"namespace": "d", "name": "p", "uid": "u"}], {"cpu": 1000}, 0.0),
    ):
        assert patch is not None
        written = {
            **r,
            "status": {**r["status"], **{k: v for k, v in patch["status"].items() if v is not None}},
        }
        assert crdschema.errors(written, CRD) == [], patch
    assert reserve_pod(placed)["spec"]["nodeName"] == "n1"


def test_wrong_types_and_empty_owners_are_refused() -> None:
    bad = reservation("r", {"cpu": "1"})
    bad["spec"]["owners"] = []
    assert crdschema.errors(bad, CRD)
    bad = reservation("r", {"cpu": "1"}, owners=[{}])
    assert crdschema.errors(bad, CRD)  # an owner must name something (minProperties 1)
    bad = reservation("r", {"cpu": "1"}, allocate_once=True)
    bad["spec"]["allocateOnce"] = "yes"
    assert crdschema.errors(bad, CRD)
    bad = reservation("r", {"cpu": "1"}, policy="Greedy")
    assert crdschema.errors(bad, CRD)
