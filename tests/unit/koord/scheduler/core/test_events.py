"""koord-scheduler's Events as kube-scheduler writes them (``schedule_one.go``, ``preemption.go``):
``events.k8s.io/v1``, regarding the pod as a Pod (a listed pod names no kind), reported by the profile
that schedules it, with kube-scheduler's actions, and the note cut to the API's limit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.core.api import KubeAPI
from koord.scheduler.core.reporter import StatusReporter
from koord.scheduler.plugins.reservation.shared import reference
from koordlet.testing.wait import wait_until
from koordshared.kube.client import make_api_client
from koordshared.kube.eventsv1 import EventBroadcaster
from koordshared.testing import objects
from koordshared.testing.reservations import reservation
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.cluster.koordscheduler import condition


@pytest.fixture
def sent(api_server: APIServer) -> Iterator[tuple[KubeAPI, EventBroadcaster]]:  # noqa: F811
    client = make_api_client(client_configuration=api_server.client_config())
    events = EventBroadcaster(client, host="host-1")
    yield KubeAPI(client, events, 5.0, ["koord-scheduler", "batch-scheduler"]), events
    client.close()


def listed(api_server: APIServer, name: str, scheduler: str) -> dict[str, Any]:  # noqa: F811
    """The pod as a list answers it (no kind, no apiVersion)."""
    created = api_server.store.create("pods", objects.pod(name, scheduler_name=scheduler))
    return {k: v for k, v in created.items() if k not in ("kind", "apiVersion")}


def by_reason(api_server: APIServer) -> dict[str, dict[str, Any]]:  # noqa: F811
    return {e["reason"]: e for e in api_server.store.list("events")[0]}


def test_scheduling_events_name_the_pod_its_profile_and_the_action(
    api_server: APIServer,  # noqa: F811
    sent: tuple[KubeAPI, EventBroadcaster],
) -> None:
    api, events = sent
    pod = listed(api_server, "web", "batch-scheduler")
    high = listed(api_server, "high", "koord-scheduler")
    api.event(pod, "Warning", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.")
    api.event(pod, "Normal", "Scheduled", "Successfully assigned default/web to n1", action="Binding")
    api.event(pod, "Normal", "Preempted", "Preempted by pod u on node n1", action="Preempting", related=high)
    events.flush()
    got = by_reason(api_server)
    assert {r: (e["action"], e["reportingComponent"]) for r, e in got.items()} == {
        "FailedScheduling": ("Scheduling", "batch-scheduler"),
        "Scheduled": ("Binding", "batch-scheduler"),
        "Preempted": ("Preempting", "koord-scheduler"),  # the preemptor's profile preempts
    }
    failed = got["FailedScheduling"]
    assert failed["involvedObject"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
        "uid": pod["metadata"]["uid"],
        "apiVersion": "v1",
        "resourceVersion": pod["metadata"]["resourceVersion"],
    }
    assert failed["reportingInstance"] == "batch-scheduler-host-1" and failed["eventTime"]
    assert got["Preempted"]["related"]["name"] == "high"
    found, _ = api_server.store.list("events", "default", field_selector="involvedObject.kind=Pod")
    assert len(found) == 3


def test_a_reservation_event_regards_the_reservation_and_long_notes_are_cut(
    api_server: APIServer,  # noqa: F811
    sent: tuple[KubeAPI, EventBroadcaster],
) -> None:
    api, events = sent
    r = reservation("r1", {"cpu": "1"}, scheduler_name="batch-scheduler")
    api.event(reference(r), "Warning", "FailedScheduling", "x" * 2000)
    events.flush()
    (ev,) = api_server.store.list("events", "default")[0]  # a cluster-scoped object's Events: default
    assert (ev["involvedObject"]["kind"], ev["involvedObject"]["apiVersion"]) == (
        "Reservation",
        "scheduling.koordinator.sh/v1alpha1",
    )
    assert ev["reportingComponent"] == "batch-scheduler"
    assert len(ev["message"]) == 1024 and ev["message"].endswith("x ...")


def test_every_failure_is_an_event_and_an_unchanged_condition_is_written_once(
    api_server: APIServer,  # noqa: F811
    sent: tuple[KubeAPI, EventBroadcaster],
) -> None:
    """kube-scheduler's ``handleSchedulingFailure`` records an Event at every failure (the broadcaster
    makes repeats a series) and ``updatePod`` skips a condition that did not change."""
    api, events = sent
    reporter = StatusReporter(api)
    pod = listed(api_server, "web", "koord-scheduler")
    why = "0/1 nodes are available: 1 Insufficient cpu."
    try:
        for _ in range(3):
            reporter.report(pod, "Unschedulable", why, None)
            events.flush()
        assert wait_until(lambda: condition(api_server, "web").get("message") == why, 5)
    finally:
        reporter.stop()
    (ev,) = api_server.store.list("events", "default")[0]
    assert ev["series"]["count"] == 2  # the third is counted, written when the series ends or refreshes
    patches = [r for r in api_server.requests if r.method == "PATCH" and r.path.endswith("/web/status")]
    assert len(patches) == 1
