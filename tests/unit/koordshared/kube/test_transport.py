"""The lean transport under ``request``: the official client's credentials and headers over TLS with RBAC
on, one kept-alive connection for a run of requests, a connection the server closed while idle replaced,
an error answer mapped as the generated client's, and the configurations it leaves to the generated
client; then its framing of answers byte for byte (length, chunks, the connection's end, 1xx, malformed
answers) against a server that sends exactly what a test gives."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable, Iterator, Mapping

import pytest

from koordshared.kube.client import ApiError, close_client, make_api_client, request
from koordshared.kube.transport import Transport, transport_of
from koordshared.runtime.httpwire import BadResponse
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.support.rawhttp import read_request

NS = "/api/v1/namespaces/default"


def test_over_tls_as_the_admin_and_as_a_service_account_on_one_connection(
    api_server_factory: Callable[..., APIServer],  # noqa: F811
) -> None:
    server = api_server_factory(tls=True, authorization=True)
    request(
        make_api_client(client_configuration=server.client_config()),
        "sa",
        "POST",
        f"{NS}/serviceaccounts",
        body={"metadata": {"name": "sched"}},
    )
    admin = make_api_client(client_configuration=server.client_config(), user_agent="lean/1")
    for _ in range(5):
        assert request(admin, "get", "GET", NS)["metadata"]["name"] == "default"
    transport = transport_of(admin)
    assert isinstance(transport, Transport) and transport.tls
    assert len(transport._idle) == 1  # five requests, one connection kept alive
    assert {r.headers.get("User-Agent") for r in server.requests if r.path == NS} == {"lean/1"}

    nobody = make_api_client(client_configuration=server.client_config("default/sched"))
    with pytest.raises(ApiError) as err:
        request(nobody, "nodes", "GET", "/api/v1/nodes")
    assert err.value.status == 403  # its own token went, not the admin's
    close_client(admin)
    close_client(nobody)


def test_a_connection_the_server_closed_while_idle_is_replaced(api_server: APIServer) -> None:  # noqa: F811
    client = make_api_client(client_configuration=api_server.client_config())
    request(client, "get", "GET", NS)
    transport = transport_of(client)
    assert transport is not None
    (idle,) = transport._idle
    assert idle.sock is not None
    idle.sock.shutdown(socket.SHUT_RDWR)  # as a server closing an idle keep-alive connection looks
    assert request(client, "get", "GET", NS)["metadata"]["name"] == "default"
    assert transport._idle and transport._idle[0] is not idle
    with pytest.raises(ApiError) as err:
        request(client, "get", "GET", "/api/v1/namespaces/nope")
    assert err.value.not_found and "nope" in str(err.value)
    close_client(client)


def test_proxies_and_server_name_overrides_stay_with_the_generated_client(
    api_server: APIServer,  # noqa: F811
) -> None:
    for field, value in (("proxy", "http://127.0.0.1:1"), ("tls_server_name", "kubernetes")):
        config = api_server.client_config()
        setattr(config, field, value)
        client = make_api_client(client_configuration=config)
        assert transport_of(client) is None
        client.close()


# ---- framing, against a server that answers exactly the bytes a test gives ----------------------------


class Closing(bytes):
    """An answer after which the server closes the connection."""


class Scripted:
    """A loopback server answering each request with the next of ``answers`` (bytes, sent ``step`` bytes at
    a time; ``None``: close the connection without answering; :class:`Closing`: close after it); counts
    connections, keeps each request."""

    def __init__(self, answers: list[bytes | None], step: int = 0) -> None:
        self.answers, self.step = list(answers), step
        self.accepted = 0
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.stopped = threading.Event()
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers and not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            self.accepted += 1
            with conn:
                buf = b""
                while self.answers and (request := read_request(conn, buf)) is not None:
                    head, body, buf = request
                    self.requests.append(head + body)
                    answer = self.answers.pop(0)
                    if answer is None:
                        break
                    step = self.step or len(answer)
                    for i in range(0, len(answer), step):
                        conn.sendall(answer[i : i + step])
                    if isinstance(answer, Closing):
                        break

    def transport(self) -> Transport:
        return Transport(f"http://127.0.0.1:{self.port}", None, lambda m, p, b: {"User-Agent": "t/1"})

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    made: list[Scripted] = []

    def make(answers: list[bytes | None], step: int = 0) -> Scripted:
        made.append(Scripted(answers, step))
        return made[-1]

    yield make
    for s in made:
        s.close()


def ask(t: Transport, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes, Mapping[str, str]]:
    resp = t.request(method, "/api/v1/x", body=body, query={"a": "1"}, headers={}, timeout=5)
    return resp.status, resp.data, resp.headers


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@pytest.mark.parametrize("step", [0, 1])
def test_answers_framed_by_length_and_chunks_on_one_connection(
    scripted: Callable[..., Scripted], step: int
) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nAudit-Id: a\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
    )
    server = scripted([OK, chunked, b"HTTP/1.1 100 Continue\r\n\r\n" + OK], step)
    t = server.transport()
    assert ask(t)[:2] == (200, b"{}")
    status, data, headers = ask(t)
    assert (status, data, headers["Audit-Id"]) == (200, b"hello world", "a")
    assert ask(t, "POST", b'{"x":1}')[:2] == (200, b"{}")
    assert server.accepted == 1  # kept alive through all three, split reads or not
    first = server.requests[0].decode()
    assert first.startswith("GET /api/v1/x?a=1 HTTP/1.1\r\n") and f"Host: 127.0.0.1:{server.port}" in first
    assert server.requests[2].endswith(b'Content-Length: 7\r\n\r\n{"x":1}')
    t.close()


def test_a_body_to_the_connections_end_and_connection_close_are_not_reused(
    scripted: Callable[..., Scripted],
) -> None:
    server = scripted(
        [
            Closing(b"HTTP/1.1 200 OK\r\n\r\nuntil the end"),
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
            OK,
        ]
    )
    t = server.transport()
    # The server closes the first connection once it has answered: the body is what came before.
    status, data, _ = ask(t)
    assert (status, data) == (200, b"until the end") and not t._idle
    assert ask(t)[1] == b"{}" and not t._idle
    assert ask(t)[1] == b"{}" and len(t._idle) == 1
    assert server.accepted == 3
    t.close()


@pytest.mark.parametrize(
    "answer",
    [
        Closing(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
        b"NOT HTTP\r\n\r\n",
        Closing(b"HTTP/1.1 200 OK\r\nContent-Le"),
    ],
)
def test_a_malformed_answer_is_an_error_and_its_connection_is_dropped(
    scripted: Callable[..., Scripted], answer: bytes
) -> None:
    server = scripted([answer])
    t = server.transport()
    with pytest.raises(BadResponse):
        ask(t)
    assert not t._idle
    t.close()


def test_a_new_connection_closed_without_an_answer_is_not_sent_again(
    scripted: Callable[..., Scripted],
) -> None:
    server = scripted([None, OK])
    t = server.transport()
    with pytest.raises(http.client.RemoteDisconnected):
        ask(t, "POST", b"{}")
    assert len(server.requests) == 1  # a write the server may have done is not repeated
    t.close()


def test_an_answer_is_read_without_the_email_package(
    scripted: Callable[..., Scripted], monkeypatch: pytest.MonkeyPatch
) -> None:
    # http.client parses every head through email.feedparser: the CPU the transport reads answers to save.
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("http.client parsed the headers")

    monkeypatch.setattr(http.client, "parse_headers", refuse)
    server = scripted([OK])
    t = server.transport()
    assert ask(t)[1] == b"{}"
    t.close()


def test_a_header_that_would_end_its_line_is_refused_before_anything_is_sent(
    scripted: Callable[..., Scripted],
) -> None:
    server = scripted([OK])
    t = Transport(
        f"http://127.0.0.1:{server.port}", None, lambda m, p, b: {"Authorization": "Bearer a\r\nX: y"}
    )
    with pytest.raises(ValueError, match="line break"):
        ask(t)
    assert server.accepted == 0
    t.close()
