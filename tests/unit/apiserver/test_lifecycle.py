"""Server lifecycle: down()/up() as seen by the client, 503 mode, and clean shutdown."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.apiserver.connections import THREAD_PREFIX
from tests.unit.apiserver.helpers import clients, is_down, new_watch, pod


def _server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def test_down_refuses_connections_and_up_restores(api_server: APIServer) -> None:
    import urllib3

    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("p1"))  # leaves a kept-alive pooled connection
    port = api_server.port
    api_server.down()
    assert is_down(api_server)
    with pytest.raises(urllib3.exceptions.MaxRetryError) as err:
        core.list_namespaced_pod("default")
    assert isinstance(err.value.reason, urllib3.exceptions.NewConnectionError)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    api_server.up()
    assert api_server.port == port and not is_down(api_server)
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["p1"]


def test_down_ends_open_watches(api_server: APIServer) -> None:

    core, _ = clients(api_server)
    ended = threading.Event()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            for _ in new_watch().stream(core.list_namespaced_pod, "default", timeout_seconds=30):
                pass
        except Exception as exc:  # either a clean end or a cut connection is fine
            errors.append(exc)
        ended.set()

    t = threading.Thread(target=consume)
    t.start()
    assert api_server.store.wait_for_watchers(1)
    api_server.down()
    assert ended.wait(5), "a watch must not outlive down()"
    t.join(5)
    api_server.up()


def test_down_503_answers_service_unavailable(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    api_server.down("503")
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("default")
    assert err.value.status == 503
    api_server.up()
    assert core.list_namespaced_pod("default").items == []


def test_stop_joins_every_thread_even_with_an_open_watch() -> None:

    before = set(_server_threads())
    server = APIServer().start()
    core, _ = clients(server)
    core.list_namespaced_pod("default")
    outcome: list[object] = []

    def consume() -> None:
        try:
            outcome.extend(new_watch().stream(core.list_namespaced_pod, "default", timeout_seconds=30))
            outcome.append("clean end")
        except Exception as exc:
            outcome.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    assert server.store.wait_for_watchers(1)
    server.stop()
    t.join(5)
    assert not t.is_alive()
    assert outcome == ["clean end"]
    assert set(_server_threads()) <= before
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()


def test_factory_fixture_stops_its_servers(api_server_factory: Any) -> None:
    a = api_server_factory()
    b = api_server_factory(crds=())
    assert a.port != b.port
    assert b.registry.lookup("slo.koordinator.sh", "v1alpha1", "nodemetrics") is None
    assert a.registry.lookup("slo.koordinator.sh", "v1alpha1", "nodemetrics") is not None


def test_request_log_and_store_seeding(api_server: APIServer) -> None:
    seeded = api_server.store.create("pods", {**pod("seeded"), "status": {"phase": "Running"}})
    # direct store writes may seed status (the QoS class is filled in, as every pod has one)
    assert seeded["status"] == {"phase": "Running", "qosClass": "BestEffort"}
    core, _ = clients(api_server)
    got = core.read_namespaced_pod("seeded", "default")
    assert got.status.phase == "Running"
    via_api = core.create_namespaced_pod("default", {**pod("api"), "status": {"phase": "Running"}})
    # API creates replace the status: a new pod is Pending (PrepareForCreate)
    assert (via_api.status.phase, via_api.status.qos_class) == ("Pending", "BestEffort")
    api_server.store.update("pods", {**seeded, "metadata": {**seeded["metadata"], "labels": {"a": "b"}}})
    assert api_server.store.get("pods", "seeded", "default")["metadata"]["labels"] == {"a": "b"}
    assert [(r.method, r.status) for r in api_server.requests] == [("GET", 200), ("POST", 201)]
    api_server.clear_requests()
    assert api_server.requests == []


def test_timed_outage_comes_back_by_itself(api_server: APIServer) -> None:
    import urllib3

    core, _ = clients(api_server)
    api_server.down(for_seconds=0.5)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespaced_pod("default")
    back = threading.Event()

    def poll() -> None:
        while not back.is_set():
            try:
                core.list_namespaced_pod("default")
                back.set()
            except urllib3.exceptions.MaxRetryError:
                back.wait(0.05)

    t = threading.Thread(target=poll)
    t.start()
    assert back.wait(5), "the server must come back after for_seconds"
    t.join(5)
    api_server.down("503", for_seconds=30)
    api_server.stop()  # cancels the pending timer and joins it
    assert not [th for th in threading.enumerate() if th.name == f"{THREAD_PREFIX}-outage"]
