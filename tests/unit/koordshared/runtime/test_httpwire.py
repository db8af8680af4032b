"""Request heads as the agent's server parses them: what it takes, what it refuses and with which status."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordshared.runtime.httpwire import BadRequest, encode_response, parse_head


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
