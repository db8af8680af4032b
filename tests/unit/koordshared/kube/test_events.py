"""Event recorder: events land on the test API server, repeats aggregate into one Event, spam is limited."""

from __future__ import annotations

import threading

from koordlet.testing import FakeClock
from koordshared.kube.client import make_api_client
from koordshared.kube.events import EventRecorder
from koordshared.kube.objectref import ObjectRef
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401

CM = ObjectRef(kind="ConfigMap", name="slo-controller-config", namespace="koordinator-system", uid="u1")


def test_events_are_created_aggregated_and_rate_limited(api_server: APIServer) -> None:  # noqa: F811
    api_server.store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CM.namespace}}
    )
    api = make_api_client(client_configuration=api_server.client_config())
    clock = FakeClock()
    rec = EventRecorder(
        api, "koord-manager", host="m1", burst=3, refill_seconds=60, clock=clock, wall_clock=clock.wall
    )
    try:
        for _ in range(5):
            rec.event(CM, "Warning", "ColocationCfgUnmarshalFailed", "bad JSON")
        rec.event(ObjectRef(kind="Node", name="n1"), "Normal", "Other", "x")
        rec.flush()
        events, _ = api_server.store.list("events", "koordinator-system")
        (ev,) = events
        assert ev["involvedObject"]["name"] == "slo-controller-config" and ev["type"] == "Warning"
        assert ev["reason"] == "ColocationCfgUnmarshalFailed" and ev["count"] == 3  # burst of 3, then dropped
        assert ev["source"] == {"component": "koord-manager", "host": "m1"}
        assert rec.dropped == 2
        (node_ev,) = api_server.store.list("events", "default")[0]  # cluster-scoped objects: "default"
        assert node_ev["involvedObject"]["kind"] == "Node"
        clock.advance(61)
        rec.event(CM, "Warning", "ColocationCfgUnmarshalFailed", "bad JSON")
        rec.flush()
        assert api_server.store.list("events", "koordinator-system")[0][0]["count"] == 4
    finally:
        api.close()


def test_run_sends_in_the_background_and_ends_on_stop(api_server: APIServer) -> None:  # noqa: F811
    api_server.store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CM.namespace}}
    )
    api = make_api_client(client_configuration=api_server.client_config())
    rec = EventRecorder(api, "koord-manager")
    stop = threading.Event()
    t = threading.Thread(target=rec.run, args=(stop,), name="test-events")
    t.start()
    try:
        rec.event(CM, "Normal", "Synced", "ok")
        assert api_server.wait_for_requests(
            lambda r: r.method == "POST" and r.path.endswith("/events"), timeout=5
        )
    finally:
        stop.set()
        t.join(5)
        api.close()
    assert not t.is_alive() and rec.sent == 1
