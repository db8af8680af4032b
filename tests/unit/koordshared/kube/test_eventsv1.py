"""The events.k8s.io/v1 recorder on the test API server: the Event kube-scheduler's recorder writes, and
client-go's series rules (second occurrence patched, later ones counted, written when the series ends or
refreshes, a new Event after 6 minutes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koordlet.testing import FakeClock
from koordshared.kube.client import make_api_client
from koordshared.kube.eventsv1 import EventBroadcaster, event_name
from koordshared.kube.objectref import ObjectRef
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401

POD = ObjectRef("Pod", "web-1", "default", "u1", "v1", "17")
PREEMPTOR = ObjectRef("Pod", "high", "default", "u2", "v1", "20")
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall_start=1_767_225_600.0)  # 2026-01-01T00:00:00Z


@pytest.fixture
def broadcaster(api_server: APIServer, clock: FakeClock) -> Iterator[EventBroadcaster]:  # noqa: F811
    api = make_api_client(client_configuration=api_server.client_config())
    yield EventBroadcaster(api, host="node-a", retry_seconds=10, clock=clock, wall_clock=clock.wall)
    api.close()


def stored(server: APIServer) -> list[dict[str, Any]]:
    return sorted(server.store.list("events", "default")[0], key=lambda e: e["metadata"]["name"])


def writes(server: APIServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in server.requests if "/events" in r.path]


def test_an_event_as_kube_schedulers_recorder_writes_it(
    api_server: APIServer,  # noqa: F811
    broadcaster: EventBroadcaster,
) -> None:
    rec = broadcaster.new_recorder("koord-scheduler")
    rec.eventf(POD, PREEMPTOR, "Normal", "Preempted", "Preempting", "Preempted by pod u2 on node n1")
    broadcaster.flush()
    (request,) = [r for r in api_server.requests if r.method == "POST"]
    assert request.path == EVENTS
    body = request.body
    assert body["apiVersion"] == "events.k8s.io/v1" and body["metadata"]["namespace"] == "default"
    assert body["metadata"]["name"] == f"web-1.{1_767_225_600 * 10**9:x}"
    assert body["eventTime"] == "2026-01-01T00:00:00.000000Z"
    assert body["regarding"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web-1",
        "uid": "u1",
        "apiVersion": "v1",
        "resourceVersion": "17",
    }
    assert body["related"]["name"] == "high" and body["related"]["kind"] == "Pod"
    assert (body["reportingController"], body["reportingInstance"]) == (
        "koord-scheduler",
        "koord-scheduler-node-a",
    )
    assert (body["type"], body["reason"], body["action"]) == ("Normal", "Preempted", "Preempting")
    assert body["note"] == "Preempted by pod u2 on node n1" and "series" not in body
    (ev,) = stored(api_server)  # core v1 view of the same Event
    assert (ev["involvedObject"]["kind"], ev["reportingComponent"], ev["message"]) == (
        "Pod",
        "koord-scheduler",
        "Preempted by pod u2 on node n1",
    )
    found, _ = api_server.store.list("events", "default", field_selector="involvedObject.kind=Pod")
    assert len(found) == 1 and broadcaster.sent == 1


def test_repeats_make_a_series_written_on_the_second_and_when_it_ends(
    api_server: APIServer,  # noqa: F811
    broadcaster: EventBroadcaster,
    clock: FakeClock,
) -> None:
    rec = broadcaster.new_recorder("koord-scheduler")
    for i in range(4):  # the note is not part of what makes two Events the same
        rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", f"0/{i} nodes are available.")
        clock.advance(1)
        broadcaster.flush()
    assert [m for m, _ in writes(api_server)] == ["POST", "PATCH"]
    (ev,) = stored(api_server)
    assert ev["series"] == {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}
    assert ev["message"] == "0/0 nodes are available."
    clock.advance(120)
    broadcaster.finish_series()  # observed 2 minutes ago: still going
    assert len(writes(api_server)) == 2
    clock.advance(300)
    broadcaster.finish_series()  # over 6 minutes: the final count, then forgotten
    (ev,) = stored(api_server)
    assert ev["series"] == {"count": 4, "lastObservedTime": "2026-01-01T00:00:03.000000Z"}
    assert [m for m, _ in writes(api_server)] == ["POST", "PATCH", "PATCH"]
    rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "again")
    broadcaster.flush()
    assert [e["message"] for e in stored(api_server)] == ["0/0 nodes are available.", "again"]


def test_a_changed_object_or_action_is_another_event_and_singletons_expire(
    api_server: APIServer,  # noqa: F811
    broadcaster: EventBroadcaster,
    clock: FakeClock,
) -> None:
    rec = broadcaster.new_recorder("koord-scheduler")
    rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "a")
    clock.advance(0.001)
    newer = ObjectRef("Pod", "web-1", "default", "u1", "v1", "18")  # the pod was written since
    rec.eventf(newer, None, "Warning", "FailedScheduling", "Scheduling", "b")
    clock.advance(0.001)
    rec.eventf(POD, None, "Normal", "Scheduled", "Binding", "c")
    broadcaster.flush()
    assert [e["message"] for e in stored(api_server)] == ["a", "b", "c"]
    clock.advance(361)
    broadcaster.finish_series()  # single Events are forgotten after 6 minutes: the next is a new one
    rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "d")
    broadcaster.flush()
    assert len(stored(api_server)) == 4 and "PATCH" not in {m for m, _ in writes(api_server)}


def test_refresh_writes_a_running_series_and_a_deleted_event_is_created_again(
    api_server: APIServer,  # noqa: F811
    broadcaster: EventBroadcaster,
    clock: FakeClock,
) -> None:
    rec = broadcaster.new_recorder("koord-descheduler")
    for _ in range(3):
        rec.eventf(POD, None, "Normal", "Descheduled", "Evicting", "pod evicted")
        clock.advance(1)
    broadcaster.flush()
    (ev,) = stored(api_server)
    api_server.store.delete("events", ev["metadata"]["name"], "default")
    broadcaster.refresh_series()  # the patch finds nothing: created again, with the count so far
    (again,) = stored(api_server)
    assert again["metadata"]["name"] == ev["metadata"]["name"] and again["series"]["count"] == 3
    assert [m for m, _ in writes(api_server)][-2:] == ["PATCH", "POST"]


def test_unreachable_server_is_retried_and_a_refusal_is_not(
    api_server: APIServer,  # noqa: F811
    broadcaster: EventBroadcaster,
    clock: FakeClock,
) -> None:
    rec = broadcaster.new_recorder("koord-scheduler")
    rec.eventf(POD, None, "Sideways", "Odd", "Scheduling", "not a type")  # refused before sending
    api_server.down()
    rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "kept")
    broadcaster.flush()
    api_server.up()
    broadcaster.flush()
    assert stored(api_server) == []  # not due yet
    clock.advance(13)
    broadcaster.flush()
    assert [e["message"] for e in stored(api_server)] == ["kept"]
    long_reason = ObjectRef("Pod", "p", "default", "u3")
    rec.eventf(long_reason, None, "Warning", "x" * 200, "Scheduling", "refused: reason too long")
    broadcaster.flush()
    clock.advance(60)
    broadcaster.flush()
    assert len(stored(api_server)) == 1 and broadcaster.dropped == 1


def test_event_names_fall_back_to_a_uuid_when_not_a_valid_name() -> None:
    assert event_name("web-1", 255) == "web-1.ff"
    assert len(event_name("Not_Valid", 255)) == 36
