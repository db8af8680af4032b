"""The agent's API calls (:class:`koordlet.statesinformer.kube.ClusterAPI`) go on REST paths: the typed API
classes, and the pydantic models their import builds, are never loaded (DaemonSet memory); on the lean
client no ``kubernetes`` module at all; the server's answers map to the same results on either client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from koordlet.statesinformer import kube
from koordlet.statesinformer.eviction import EvictResult
from koordshared.kube.kubeconfig import Endpoint
from koordshared.kube.transport import LeanClient
from koordshared.runtime.errors import APIUnavailable

PROBE = """
import sys
from koordlet.statesinformer import kube
from koordshared.runtime.errors import APIUnavailable

if sys.argv[1] == "official":
    from kubernetes import client
    from koordshared.kube.client import make_api_client

    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard: nothing answers, every call is an unreachable server
    api_client = make_api_client(client_configuration=cfg)
else:
    from koordshared.kube.kubeconfig import Endpoint
    from koordshared.kube.transport import LeanClient

    api_client = LeanClient(Endpoint(server="http://127.0.0.1:9", token="t"))
api = kube.ClusterAPI(api_client, "node-1", request_timeout=0.5)
api.pods_informer(); api.node_informer(); api.custom_informer("nodeslos")
for call in (
    api.create_node_metric,
    lambda: api.update_node_metric_status({}, {"metadata": {"name": "node-1"}}),
    lambda: api.write_node_topology({}, create=True),
    lambda: api.evict("ns", "pod", "uid"),
    lambda: api.create_event("Pod", "ns", "pod", "uid", "Normal", "Test", "message", 0.0),
):
    try:
        call()
    except APIUnavailable:
        pass
api.close()
print(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes" and (
    sys.argv[1] == "lean" or m.startswith(("kubernetes.client.api.", "kubernetes.client.models."))
)))
"""


@pytest.mark.parametrize("client", ["official", "lean"])
def test_the_agent_loads_no_typed_api_class_nor_model(client: str) -> None:
    """The informers and writes of the agent built ``CoreV1Api`` and ``CustomObjectsApi``, whose import
    builds some 250 pydantic models (about 10 MiB of the DaemonSet's RSS) for answers decoded as plain
    JSON anyway; on the lean client the writes imported the official ``ApiException`` to catch (the
    package's ``__init__``: some 17 MiB)."""
    out = subprocess.run([sys.executable, "-c", PROBE, client], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout[:500]


class Answers:
    """A server answering every request with ``status`` (a Status body), counting the requests."""

    def __init__(self) -> None:
        self.status = 200
        self.requests: list[tuple[str, str]] = []
        answers = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answers.requests.append((self.command, self.path))
                code = answers.status
                doc: dict[str, Any] = {"metadata": {"name": "node-1", "resourceVersion": "1"}}
                if code >= 300:
                    doc = {"kind": "Status", "code": code, "reason": "Why", "message": "because"}
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})


@pytest.fixture
def answers() -> Iterator[Answers]:
    server = Answers()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
    server.thread.join()


@pytest.fixture
def lean_api(answers: Answers) -> Iterator[kube.ClusterAPI]:
    api = kube.ClusterAPI(LeanClient(Endpoint(server=answers.url, token="t")), "node-1", request_timeout=2)
    yield api
    api.close()


@pytest.mark.parametrize(
    ("status", "result"),
    [
        (201, EvictResult.EVICTED),
        (429, EvictResult.BLOCKED),
        (404, EvictResult.GONE),
        (409, EvictResult.CONFLICT),
        (500, EvictResult.ERROR),
    ],
)
def test_lean_eviction_answers(answers: Answers, lean_api: kube.ClusterAPI, status: int, result: Any) -> None:
    answers.status = status
    assert lean_api.evict("ns", "pod", "uid") is result
    assert answers.requests == [("POST", "/api/v1/namespaces/ns/pods/pod/eviction")]


@pytest.mark.parametrize("status", [404, 409, 429, 500])
def test_lean_writes_return_the_servers_status(
    answers: Answers, lean_api: kube.ClusterAPI, status: int
) -> None:
    answers.status = status
    assert lean_api.create_node_metric() == status
    assert lean_api.write_node_topology({}, create=False) == status
    assert lean_api.write_node_topology({}, create=True) == status
    assert not lean_api.create_event("Pod", "ns", "pod", "uid", "Normal", "Test", "message", 0.0)
    answers.requests.clear()
    assert lean_api.update_node_metric_status({}, {"metadata": {"name": "node-1"}}) == status
    # a conflict is tried again on a fresh read (which conflicts here too), CONFLICT_ATTEMPTS times in all
    assert len(answers.requests) == (kube.CONFLICT_ATTEMPTS if status == 409 else 1)
    answers.status = 200
    assert lean_api.update_node_metric_status({}, None) == 200
    assert answers.requests[-2:] == [
        ("GET", "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/node-1"),
        ("PUT", "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/node-1/status"),
    ]


def test_lean_unreachable_server_is_api_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: every connection is refused
        api = kube.ClusterAPI(LeanClient(Endpoint(server=f"http://127.0.0.1:{port}")), "node-1", 1.0)
        for call in (
            api.create_node_metric,
            lambda: api.update_node_metric_status({}, None),
            lambda: api.write_node_topology({}, create=True),
        ):
            with pytest.raises(APIUnavailable):
                call()
        assert api.evict("ns", "pod", "uid") is EvictResult.ERROR
        assert not api.create_event("Pod", "ns", "pod", "uid", "Normal", "Test", "message", 0.0)
        api.close()
