"""Wire-level behaviour checked with plain ``http.client`` (what the official client does not exercise)."""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

import pytest

from koordlet.testing.wait import wait_until
from tests.apiserver import APIServer, requestinfo
from tests.apiserver.connections import THREAD_PREFIX
from tests.unit.apiserver.helpers import connect as _conn
from tests.unit.apiserver.helpers import nodemetric, pod
from tests.unit.apiserver.helpers import raw_call as _call


def test_post_without_content_type_is_json(api_server: APIServer) -> None:
    code, body = _call(api_server, "POST", "/api/v1/namespaces/default/pods", pod("p1"))
    assert code == 201 and body["metadata"]["name"] == "p1"


def test_watch_1_streams_chunked_lines_and_ends_with_the_terminator(api_server: APIServer) -> None:
    api_server.store.create("pods", pod("p1"))
    conn = _conn(api_server)
    try:
        conn.request("GET", "/api/v1/namespaces/default/pods?watch=1&resourceVersion=0&timeoutSeconds=1")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
        lines = resp.read().splitlines()  # returns only once the zero-length chunk arrived
    finally:
        conn.close()
    assert [json.loads(line)["type"] for line in lines] == ["ADDED"]


def test_deprecated_watch_path_and_410_error_event(api_server_factory: Any) -> None:
    server = api_server_factory(history_limit=1)
    for i in range(3):
        server.store.create("pods", pod(f"p{i}"))
    code, _ = _call(
        server, "GET", "/api/v1/watch/namespaces/default/pods?resourceVersion=3&timeoutSeconds=0.2"
    )
    assert code == 200
    conn = _conn(server)
    try:
        conn.request("GET", "/api/v1/pods?watch=true&resourceVersion=1")
        resp = conn.getresponse()
        (line,) = resp.read().splitlines()
    finally:
        conn.close()
    event = json.loads(line)
    assert resp.status == 200 and event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/widgets", 404),
        ("GET", "/apis/nope.example.com/v1", 404),
        ("GET", "/api/v1/namespaces/default/nodes/x", 404),
        ("GET", "/api/v1/pods/p1", 404),
        ("PUT", "/api/v1/namespaces/default/pods", 405),
        ("GET", "/api/v1/namespaces/default/events/e/status", 404),
    ],
)
def test_bad_routes(api_server: APIServer, method: str, path: str, expected: int) -> None:
    code, body = _call(api_server, method, path)
    assert code == expected and body["kind"] == "Status"


def test_discovery_of_one_group(api_server: APIServer) -> None:
    code, body = _call(api_server, "GET", "/apis/slo.koordinator.sh")
    assert code == 200 and body["preferredVersion"]["groupVersion"] == "slo.koordinator.sh/v1alpha1"
    code, body = _call(api_server, "GET", "/healthz")
    assert (code, body) == (200, b"ok")


def test_patch_media_types(api_server: APIServer) -> None:
    api_server.store.create("nodemetrics", nodemetric())
    path = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/node-a"
    code, _ = _call(
        api_server, "PATCH", path, {"spec": {}}, **{"Content-Type": "application/apply-patch+yaml"}
    )
    assert code == 415
    code, _ = _call(
        api_server, "PATCH", path, [{"op": "add"}], **{"Content-Type": "application/merge-patch+json"}
    )
    assert code == 400
    code, body = _call(
        api_server,
        "PATCH",
        path,
        [{"op": "remove", "path": "/spec/metricCollectPolicy"}],
        **{"Content-Type": "application/json-patch+json"},
    )
    assert code == 200 and body["spec"] == {} and body["metadata"]["generation"] == 2


def test_delete_collection_with_a_selector(api_server: APIServer) -> None:
    for name, app in (("a", "web"), ("b", "web"), ("c", "db")):
        api_server.store.create("pods", pod(name, app=app))
    query = "labelSelector=app%3Dweb&gracePeriodSeconds=0"
    code, body = _call(api_server, "DELETE", f"/api/v1/namespaces/default/pods?{query}")
    assert code == 200 and sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    items, _ = api_server.store.list("pods")
    assert [i["metadata"]["name"] for i in items] == ["c"]


_ENDED: dict[str, Any] = {}


def test_fixture_teardown_part_1_uses_a_server(api_server: APIServer) -> None:
    _ENDED["port"] = api_server.port
    _ENDED["threads"] = {t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)}
    assert f"{THREAD_PREFIX}-{api_server.port}" in _ENDED["threads"]


def test_fixture_teardown_part_2_server_is_gone() -> None:
    if "port" not in _ENDED:
        pytest.skip("runs after part 1 only")
    alive = {t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)}
    assert f"{THREAD_PREFIX}-{_ENDED['port']}" not in alive
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", _ENDED["port"]), timeout=1).close()


def test_deprecated_watch_of_one_object(api_server: APIServer) -> None:
    """``/watch/namespaces/<ns>/pods/<name>`` watches that object alone (RequestInfo turns the name into
    a ``metadata.name`` field selector)."""
    for name in ("a", "b"):
        api_server.store.create("pods", pod(name))
    conn = _conn(api_server)
    try:
        conn.request("GET", "/api/v1/watch/namespaces/default/pods/a?timeoutSeconds=1")
        resp = conn.getresponse()
        lines = [json.loads(line) for line in resp.read().decode().splitlines() if line.startswith("{")]
    finally:
        conn.close()
    assert resp.status == 200 and [e["object"]["metadata"]["name"] for e in lines] == ["a"]


@pytest.mark.parametrize(
    ("selector", "name"),
    [
        ("metadata.name=node-a", "node-a"),
        ("metadata.name==node-a,spec.x=y", "node-a"),
        ("spec.nodeName=node-a", ""),
        ("metadata.name!=node-a", ""),
        ("metadata.name=a/b", ""),
    ],
)
def test_list_with_an_exact_name_selector_is_a_request_for_that_name(selector: str, name: str) -> None:
    """staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go (NewRequestInfo): a list or watch
    whose field selector requires an exact ``metadata.name`` carries that name, so RBAC ``resourceNames``
    rules can allow it."""
    for watch in ("", "true"):
        query = {"fieldSelector": selector, **({"watch": watch} if watch else {})}
        info = requestinfo.parse("GET", "/apis/slo.koordinator.sh/v1alpha1/nodeslos", query)
        assert info.verb == ("watch" if watch else "list")
        assert info.name == ""  # routing still sees a list or watch
        assert requestinfo.for_authorization(info, query).name == name


def test_a_request_is_in_the_log_once_its_answer_arrived(api_server: APIServer) -> None:
    """The log entry is written before the answer is sent: a client that reads the log right after its
    own call must find it (fast answers used to race the logging)."""
    for i in range(50):
        path = f"/api/v1/namespaces/default/configmaps/missing-{i}"
        code, _ = _call(api_server, "GET", path)
        assert code == 404
        assert any(r.path == path and r.status == 404 for r in api_server.requests), i


def test_a_client_resetting_its_connection_prints_no_traceback(
    api_server: APIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-apiserver logs nothing when a client drops a connection mid-request; benches that stop their
    clients used to bury their figures under one traceback per connection."""
    httpd = api_server._httpd
    assert httpd is not None
    sock = socket.create_connection(("127.0.0.1", api_server.port))
    sock.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n")  # headers unfinished: the handler waits
    assert wait_until(lambda: len(httpd._conns) == 1, 10, step=0.01)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # with a zero linger time: a reset, not a clean end
    assert wait_until(lambda: not httpd._conns, 10, step=0.01)
    assert "Traceback" not in capsys.readouterr().err
    try:  # a fault of the server's own still shows
        raise ValueError("handler bug")
    except ValueError:
        httpd.handle_error(None, ("127.0.0.1", 1))
    assert "ValueError: handler bug" in capsys.readouterr().err
