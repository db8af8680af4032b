"""The PodGroup CRD (deploy/scheduler/crds): generated from its script, Koordinator's shape (namespaced,
no status subresource), and it accepts what users and koord-scheduler write, refusing wrong types."""

from __future__ import annotations

from typing import Any

import yaml

from tests import crdschema
from tests.support.paths import ROOT

CRDS = ROOT / "deploy" / "scheduler" / "crds"
CRD = CRDS / "scheduling.sigs.k8s.io_podgroups.yaml"


def test_koordinators_shape() -> None:
    doc = yaml.safe_load(CRD.read_text())
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "podgroups.scheduling.sigs.k8s.io"
    assert spec["scope"] == "Namespaced" and spec["names"]["kind"] == "PodGroup"
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and "subresources" not in version


def podgroup(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "job-a",
            "namespace": "default",
            "annotations": {"gang.scheduling.koordinator.sh/mode": "NonStrict"},
        },
        "spec": {
            "minMember": 4,
            "scheduleTimeoutSeconds": 300,
            "minResources": {"cpu": "4", "memory": "8Gi"},
        },
        "status": status,
    }


def test_what_users_and_the_controller_write_is_valid_and_wrong_types_are_not() -> None:
    assert crdschema.errors(podgroup(), CRD) == []
    written = podgroup(
        phase="Running",
        occupiedBy="default/job-a",
        scheduled=4,
        running=4,
        succeeded=0,
        failed=0,
        scheduleStartTime="2026-01-01T00:00:00Z",
    )
    assert crdschema.errors(written, CRD) == []
    bad = podgroup()
    bad["spec"]["minMember"] = "four"
    assert crdschema.errors(bad, CRD)
