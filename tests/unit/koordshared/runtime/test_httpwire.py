"""Request heads as the processes' server parses them (what it takes, what it refuses and with which
status); requests as the lean client encodes them and response heads as it frames them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordshared.runtime.httpwire import (
    BadRequest,
    BadResponse,
    encode_request,
    encode_response,
    parse_head,
    parse_response_head,
)


def head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def test_a_get_with_query_and_headers() -> None:
    req = parse_head(head("GET /events/?since=3&limit=2 HTTP/1.1", "Host: x", "X-A: 1", "x-a: 2"))
    assert (req.method, req.path, req.version) == ("GET", "/events", "HTTP/1.1")
    assert req.query == {"since": ["3"], "limit": ["2"]}
    assert req.header("x-a") == "1, 2" and req.header("host") == "x"
    assert req.keep_alive


@pytest.mark.parametrize(
    ("version", "connection", "keep"),
    [
        ("HTTP/1.1", "", True),
        ("HTTP/1.1", "close", False),
        ("HTTP/1.1", "Keep-Alive, Close", False),
        ("HTTP/1.0", "", False),
        ("HTTP/1.0", "keep-alive", True),
    ],
)
def test_keep_alive_follows_the_version_default(version: str, connection: str, keep: bool) -> None:
    lines = [f"GET / {version}"] + ([f"Connection: {connection}"] if connection else [])
    assert parse_head(head(*lines)).keep_alive is keep


@pytest.mark.parametrize(
    ("lines", "status"),
    [
        (["POST /metrics HTTP/1.1", "Content-Length: 0"], 405),
        (["DELETE /events HTTP/1.1"], 405),
        (["GET /metrics HTTP/1.1", "Content-Length: 5"], 413),
        (["GET /metrics HTTP/1.1", "Transfer-Encoding: chunked"], 413),
        (["GET /metrics HTTP/2.0"], 505),
        (["GET /metrics"], 400),
        (["GET  /metrics HTTP/1.1"], 400),
        (["GET metrics HTTP/1.1"], 400),
        (["G(T / HTTP/1.1"], 400),
        (["GET / HTTP/1.1", "no colon here"], 400),
        (["GET / HTTP/1.1", "Bad Name: x"], 400),
        (["GET / HTTP/1.1", *[f"H{i}: v" for i in range(101)]], 400),
    ],
)
def test_refused_with_the_right_status(lines: list[str], status: int) -> None:
    with pytest.raises(BadRequest) as err:
        parse_head(head(*lines))
    assert err.value.status == status


def test_head_is_served_and_absolute_targets_are_taken() -> None:
    assert parse_head(head("HEAD http://node:9316/metrics HTTP/1.1")).path == "/metrics"


@pytest.mark.parametrize(
    ("value", "gzip"),
    [("gzip", True), ("br, GZIP;q=0.5", True), ("gzip;q=0", False), ("identity", False), ("", False)],
)
def test_accept_encoding(value: str, gzip: bool) -> None:
    assert parse_head(head("GET / HTTP/1.1", f"Accept-Encoding: {value}")).accepts("gzip") is gzip


def test_response_encoding() -> None:
    out = encode_response(200, "text/plain", b"hello", keep_alive=False, extra=[("Vary", "Accept-Encoding")])
    top, _, body = out.partition(b"\r\n\r\n")
    assert body == b"hello"
    assert top.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert b"Content-Length: 5" in top and b"Connection: close" in top and b"Vary: Accept-Encoding" in top
    only = encode_response(200, "text/plain", b"hello", keep_alive=True, head_only=True)
    assert only.endswith(b"\r\n\r\n") and b"Content-Length: 5" in only and b"hello" not in only


@given(st.binary(max_size=2048))
def test_any_bytes_parse_or_are_refused_cleanly(raw: bytes) -> None:
    try:
        req = parse_head(raw)
    except BadRequest as err:
        assert err.status in (400, 405, 413, 505)
    else:
        assert req.method in ("GET", "HEAD") and req.path.startswith("/")


# ---- the client's side ---------------------------------------------------------------------------


def test_a_request_is_one_buffer_with_host_and_length() -> None:
    raw = encode_request("POST", "/api/v1/x", "10.0.0.1:6443", {"User-Agent": "k/1"}, b'{"a":1}')
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /api/v1/x HTTP/1.1",
        b"Host: 10.0.0.1:6443",
        b"User-Agent: k/1",
        b"Content-Length: 7",
    ]
    assert body == b'{"a":1}'
    # A write without a body still says so; a read says nothing (as http.client sends them).
    assert b"Content-Length: 0" in encode_request("POST", "/x", "h", {}, None)
    assert b"Content-Length" not in encode_request("GET", "/x", "h", {}, None)


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/x HTTP/1.1\r\nX-Evil: 1", {}),
        ("/a b", {}),
        ("/x", {"Authorization": "Bearer t\r\nX-Evil: 1"}),
        ("/x", {"X-A\n": "v"}),
    ],
)
def test_a_line_break_in_a_request_is_refused(target: str, headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="line break or control character"):
        encode_request("GET", target, "h", headers, None)


def response(*lines: str) -> bytes:
    return head(*lines)


def test_a_response_head_keeps_the_servers_names_and_frames_by_length() -> None:
    got = parse_response_head(
        response("HTTP/1.1 201 Created", "Audit-Id: 1", "Warning: a", "Warning: b", "Content-Length: 12")
    )
    assert (got.status, got.reason, got.length, got.chunked, got.keep_alive) == (
        201,
        "Created",
        12,
        False,
        True,
    )
    assert got.headers == {"Audit-Id": "1", "Warning": "a, b", "Content-Length": "12"}


@pytest.mark.parametrize(
    ("lines", "length", "chunked", "keep"),
    [
        (["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"], None, True, True),
        (["HTTP/1.1 200 OK", "transfer-encoding: gzip, Chunked"], None, True, True),
        (["HTTP/1.1 200 OK", "Content-Length: 3", "Connection: close"], 3, False, False),
        (["HTTP/1.1 200 OK"], None, False, False),  # to the connection's end
        (["HTTP/1.1 204 No Content"], 0, False, True),
        (["HTTP/1.1 304 Not Modified"], 0, False, True),
        (["HTTP/1.1 100 Continue"], 0, False, True),
        (["HTTP/1.0 200 OK", "Content-Length: 3"], 3, False, False),
        (["HTTP/1.0 200 OK", "Content-Length: 3", "Connection: keep-alive"], 3, False, True),
        (["HTTP/1.1 200 OK", "Content-Length: 3", "Content-Length: 3"], 3, False, True),
        (["HTTP/1.1 200 OK", "Content-Length: 7", "Transfer-Encoding: chunked"], None, True, True),
    ],
)
def test_a_response_body_is_framed_as_rfc_9112_says(
    lines: list[str], length: int | None, chunked: bool, keep: bool
) -> None:
    got = parse_response_head(response(*lines))
    assert (got.length, got.chunked, got.keep_alive) == (length, chunked, keep)


@pytest.mark.parametrize(
    "lines",
    [
        ["HTTP/2 200 OK"],
        ["HTTP/1.1 2000 OK"],
        ["HTTP/1.1 OK"],
        ["ICY 200 OK"],
        ["HTTP/1.1 200 OK", "no colon"],
        ["HTTP/1.1 200 OK", "Bad Name: x"],
        ["HTTP/1.1 200 OK", "Content-Length: 3", "Content-Length: 4"],
        ["HTTP/1.1 200 OK", "Content-Length: -1"],
        ["HTTP/1.1 200 OK", *[f"H{i}: v" for i in range(101)]],
        [],
    ],
)
def test_a_response_head_that_is_not_http_is_refused(lines: list[str]) -> None:
    with pytest.raises(BadResponse):
        parse_response_head(response(*lines) if lines else b"\r\n\r\n")


@given(st.binary(max_size=200))
def test_any_bytes_as_a_response_head_parse_or_raise_bad_response(raw: bytes) -> None:
    try:
        got = parse_response_head(raw)
    except BadResponse:
        return
    assert 0 <= got.status <= 999 and (got.length is None or got.length >= 0)
