"""Reservation in the real ``koord-scheduler`` process against the test API server (with the repository's
Reservation CRD), the issue's scenarios one after another in one process: a reservation is placed and
becomes Available; its room is its owner's and no one else's; the owner is placed in it
(``reservation-allocated``), the reservation becomes Succeeded and its leftover room returns to the node;
an unplaceable reservation says why on itself; a short-lived one expires and is garbage collected; and the
ClusterRole of ``deploy/scheduler/reservation-rbac.yaml`` allows exactly the plugin's own API traffic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing.wait import wait_until
from koordshared.apis.core.pod import condition
from koordshared.apis.scheduling import reservation as rsv
from koordshared.testing import objects
from koordshared.testing.reservations import owner_labels, reservation
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS, api_server_factory  # noqa: F401
from tests.cluster.koordscheduler import KoordSchedulerProcess, configuration, node_of, running
from tests.support.paths import ROOT
from tests.support.scheduler.reservationkit import profile
from tests.unit.deploy.test_rbac import READ_VERBS, allows, attributes, granted

pytestmark = pytest.mark.slow

DEPLOY = ROOT / "deploy" / "scheduler"
CRD = DEPLOY / "crds" / "scheduling.koordinator.sh_reservations.yaml"
CONFIG = configuration(profile({"gcDurationSeconds": 2}))
WEB = {"app": "web"}
PREBIND_PATCH = ("patch", "scheduling.koordinator.sh", "reservations")
"""Granted for the PreBind plugins that annotate a reservation they place (NodeNUMAResource, DeviceShare:
their ``pre_bind_reservation``); no plugin of this profile does."""


@pytest.fixture
def server(api_server_factory: Callable[..., APIServer]) -> APIServer:  # noqa: F811
    return api_server_factory(crds=[*DEFAULT_CRDS, CRD])


def create(server: APIServer, r: dict[str, Any]) -> None:
    """As a client creates it: no uid, no status (the server assigns one and keeps none on create)."""
    meta = {k: v for k, v in r["metadata"].items() if k != "uid"}
    server.store.create("reservations", {**r, "metadata": meta, "status": {}})


def found(server: APIServer, name: str) -> dict[str, Any]:
    items, _ = server.store.list("reservations")
    for r in items:
        if r["metadata"]["name"] == name:
            return dict(r)
    return {}


def pod(name: str, cpu: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    p = objects.pod(name, requests={"cpu": cpu}, labels=labels, scheduler_name="koord-scheduler")
    return {**p, "metadata": {k: v for k, v in p["metadata"].items() if k != "uid"}}


def reservation_events(server: APIServer, name: str, reason: str) -> list[str]:
    events, _ = server.store.list("events")
    return [
        str(e.get("message"))
        for e in events
        if e.get("involvedObject", {}).get("kind") == "Reservation"
        and e.get("involvedObject", {}).get("name") == name
        and e.get("reason") == reason
    ]


def wait(cond: Callable[[], object], proc: KoordSchedulerProcess, timeout: float = 30) -> None:
    assert wait_until(cond, timeout, step=0.05), proc.log()[-3000:]


def test_reservations_in_the_process(server: APIServer, tmp_path: Path) -> None:
    server.store.create("nodes", objects.node("n0", "4", "16Gi"))
    before = len(server.requests)
    with running(tmp_path, server, CONFIG) as proc:
        # Placed as its reserve pod: Available on n0, holding 3 of its 4 cpus.
        create(server, reservation("r1", {"cpu": "3"}, owners=[owner_labels(WEB)]))
        wait(lambda: rsv.is_available(found(server, "r1")), proc)
        r1 = found(server, "r1")
        assert rsv.node_of(r1) == "n0" and r1["status"]["allocatable"] == {"cpu": "3"}
        placed = ["Successfully assigned r1 to n0"]
        wait(lambda: reservation_events(server, "r1", "Scheduled") == placed, proc)

        # Its room is its owner's: another pod waits, the owner is placed in it.
        server.store.create("pods", pod("other", "2"))
        wait(lambda: server.store.get("pods", "other", "default").get("status", {}).get("conditions"), proc)
        assert node_of(server, "other") == ""
        server.store.create("pods", pod("web", "2", WEB))
        wait(lambda: node_of(server, "web") == "n0", proc)
        annotations = server.store.get("pods", "web", "default")["metadata"]["annotations"]
        assert rsv.allocated_of({"metadata": {"annotations": annotations}}) == ("r1", r1["metadata"]["uid"])

        # Allocate-once: Succeeded with its owner; its leftover cpu is the node's again, so "other" fits.
        wait(lambda: node_of(server, "other") == "n0", proc)
        # Garbage collected 2 s after it ended (gcDurationSeconds).
        wait(lambda: not found(server, "r1"), proc)

        # A reservation no node can hold says why, on itself.
        create(server, reservation("big", {"cpu": "8"}, owners=[owner_labels(WEB)]))
        wait(lambda: condition(found(server, "big"), rsv.CONDITION_SCHEDULED), proc)
        scheduled = condition(found(server, "big"), rsv.CONDITION_SCHEDULED) or {}
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
        assert scheduled["message"] == "0/1 nodes are available: 1 Insufficient cpu."
        wait(lambda: reservation_events(server, "big", "FailedScheduling"), proc)
        assert rsv.phase_of(found(server, "big")) in ("", "Pending")

        # A short-lived one on a new node: Available, then Failed (Expired), then collected.
        server.store.create("nodes", objects.node("n1", "4", "16Gi"))
        create(
            server, reservation("brief", {"cpu": "1"}, owners=[owner_labels(WEB)], ttl="3s", node_name="n1")
        )
        wait(lambda: rsv.is_available(found(server, "brief")) or rsv.is_expired(found(server, "brief")), proc)
        wait(lambda: not found(server, "brief"), proc)
    traffic = [r for r in server.requests[before:] if "/reservations" in r.path]
    written = [r.body["status"] for r in traffic if r.method == "PATCH" and r.path.endswith("/status")]
    r1_owned = [s for s in written if s.get("currentOwners")]
    assert r1_owned and r1_owned[0]["phase"] == "Succeeded" and r1_owned[0]["allocated"] == {"cpu": "2"}
    assert r1_owned[0]["currentOwners"][0]["name"] == "web"
    assert [s["phase"] for s in written if s.get("phase") == "Failed"] == ["Failed"]  # brief expired once
    role = [d for d in yaml.safe_load_all((DEPLOY / "reservation-rbac.yaml").read_text()) if d]
    (cluster_role,) = [d for d in role if d["kind"] == "ClusterRole"]
    rules = cluster_role["rules"]
    used = {attributes(r) for r in traffic}
    assert sorted((a.verb, a.resource) for a in used if not allows(rules, a)) == []
    unused = sorted(
        (a.verb, a.group, a.resource) for a in granted(rules) if a not in used and a.verb not in READ_VERBS
    )
    assert unused == [PREBIND_PATCH]
