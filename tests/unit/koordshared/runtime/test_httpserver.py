"""The agent's HTTP server under load and abuse: idle and slow clients hold no thread, limits answer with
the right status, a vanished client is one log line, probes answer while every worker is busy."""

from __future__ import annotations

import gzip
import logging
import socket
import struct
import threading
import time

import pytest

from koordlet.testing import wait_until
from koordlet.testing.wakeups import voluntary_switches
from koordshared.runtime.httpconn import Limits
from koordshared.runtime.httpserver import Rendered, text_response
from tests.support.rawhttp import connect, get, read_response
from tests.unit.koordshared.runtime.conftest import Serve


def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_routes_probes_not_found_and_head(serve: Serve) -> None:
    server = serve()
    assert get(server, "/hello?who=a&who=b")[::2] == (200, b"hello a,b\n")
    assert get(server, "/healthz")[::2] == (200, b"ok\n")
    status, _, body = get(server, "/nope")
    assert status == 404 and b"/hello" in body
    with connect(server) as s:
        s.sendall(b"HEAD /hello HTTP/1.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    assert data.endswith(b"\r\n\r\n") and b"Content-Length: 7" in data


def test_idle_connections_cost_no_thread_and_are_closed_after_the_idle_timeout(serve: Serve) -> None:
    # Once, 200 idle connections left 80 threads behind, one per connection, with no read timeout.
    server = serve(Limits(idle_timeout=3.0))  # connects past the backlog retry after 1 s
    assert get(server, "/hello")[0] == 200
    threads = threading.active_count()
    idle = [connect(server) for _ in range(200)]
    try:
        assert wait_until(lambda: server.open_connections() == 200, 5)
        assert threading.active_count() == threads
        assert get(server, "/hello")[0] == 200  # still serving
        assert wait_until(lambda: all(closed_by_server(s) for s in idle), 10)
        assert wait_until(lambda: server.open_connections() == 0, 5)
    finally:
        for s in idle:
            s.close()


def test_a_slow_client_is_cut_after_the_request_timeout(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(Limits(request_timeout=0.5))
    caplog.set_level(logging.INFO, "koordshared.runtime.httpconn")
    with connect(server) as slow:
        slow.sendall(b"GET /hello HTTP/1.1\r\n")
        started = time.monotonic()
        cut = False
        while time.monotonic() - started < 5:
            try:
                slow.sendall(b"X")  # one byte at a time keeps a read timeout from ever firing
            except OSError:
                cut = True
                break
            if closed_by_server(slow):
                cut = True
                break
            assert get(server, "/hello")[0] == 200
            time.sleep(0.1)
        assert cut and time.monotonic() - started < 2.0
    assert any("no complete request" in r.getMessage() for r in caplog.records)


def test_a_head_over_the_limit_is_431(serve: Serve) -> None:
    server = serve(Limits(head_bytes=1024))
    status, headers, _ = get(server, "/hello", "X-Pad: " + "p" * 2000)
    assert status == 431 and headers["connection"] == "close"


def test_past_max_connections_the_quietest_makes_room(serve: Serve) -> None:
    server = serve(Limits(max_connections=8))
    held = [connect(server) for _ in range(8)]
    try:
        assert wait_until(lambda: server.open_connections() == 8, 5)
        assert get(server, "/hello")[0] == 200
        assert wait_until(lambda: closed_by_server(held[0]), 5)
        assert not any(closed_by_server(s) for s in held[2:])
    finally:
        for s in held:
            s.close()


def test_keep_alive_and_pipelined_requests_are_answered_in_order(serve: Serve) -> None:
    server = serve()
    with connect(server) as s:
        s.sendall(
            b"GET /hello?who=1 HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\nGET /hello?who=3 HTTP/1.1\r\n\r\n"
        )
        assert [read_response(s)[2] for _ in range(3)] == [b"hello 1\n", b"ok\n", b"hello 3\n"]
        s.sendall(b"GET /hello?who=4 HTTP/1.1\r\n\r\n")
        assert read_response(s)[2] == b"hello 4\n"


def test_a_client_that_goes_away_is_one_log_line(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    server = serve()
    big = b"x" * (32 << 20)
    server.route("/big", lambda _q: (200, "text/plain", big))
    caplog.set_level(logging.DEBUG)
    s = connect(server)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
    s.sendall(b"GET /big HTTP/1.1\r\n\r\n")
    s.recv(1024)
    s.close()
    assert wait_until(lambda: any("went away" in r.getMessage() for r in caplog.records), 5)
    with connect(server) as half:
        half.sendall(b"GET /hello HTTP/1.1\r\n")
    assert wait_until(lambda: any("middle of a request" in r.getMessage() for r in caplog.records), 5)
    noisy = [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]
    assert noisy == []
    assert len([r for r in caplog.records if "went away" in r.getMessage()]) == 1
    assert get(server, "/hello")[0] == 200


def test_probes_answer_while_every_worker_is_busy(serve: Serve) -> None:
    server = serve(Limits(workers=2))
    release = threading.Event()
    server.route("/slow", lambda _q: (release.wait(10), text_response("late\n"))[1])
    callers = [threading.Thread(target=get, args=(server, "/slow")) for _ in range(3)]
    for t in callers:
        t.start()
    try:
        time.sleep(0.2)
        started = time.monotonic()
        assert get(server, "/healthz")[0] == 200
        assert time.monotonic() - started < 0.5
    finally:
        release.set()
        for t in callers:
            t.join(10)


def test_a_rendered_payload_is_served_gzipped_when_accepted(serve: Serve) -> None:
    server = serve()
    body = b"metric 1\n" * 1000
    server.route("/rendered", lambda _q: Rendered(200, "text/plain", body, gzip.compress(body)))
    status, headers, data = get(server, "/rendered", "Accept-Encoding: gzip")
    assert status == 200 and headers["content-encoding"] == "gzip" and gzip.decompress(data) == body
    status, headers, data = get(server, "/rendered")
    assert data == body and "content-encoding" not in headers and headers["vary"] == "Accept-Encoding"


def test_a_failing_route_is_a_500_and_the_server_goes_on(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    server.route("/bug", lambda _q: 1 // 0)  # type: ignore[arg-type,return-value]
    caplog.set_level(logging.ERROR)
    status, _, body = get(server, "/bug")
    assert status == 500 and b"ZeroDivisionError" in body
    assert get(server, "/hello")[0] == 200


def test_shutdown_cuts_a_client_that_stopped_reading(serve: Serve) -> None:
    server = serve(Limits(write_timeout=30))
    big = b"x" * (64 << 20)
    server.route("/big", lambda _q: (200, "text/plain", big))
    s = connect(server)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /big HTTP/1.1\r\n\r\n")
    time.sleep(0.3)
    started = time.monotonic()
    server.shutdown()
    assert time.monotonic() - started < 3.0
    s.close()


def test_an_idle_server_sleeps_until_a_deadline_or_a_request(serve: Serve) -> None:
    # The socket thread polled every 0.5 s (two of the idle agent's wake-ups a second); it now
    # sleeps until the nearest connection deadline, and a request still wakes it at once.
    server = serve(Limits(idle_timeout=60.0))
    with connect(server) as kept:  # an idle keep-alive connection, its deadline a minute away
        assert get(server, "/hello")[0] == 200
        socket_thread = next(t for t in threading.enumerate() if t.name == "http")
        before = voluntary_switches(socket_thread)
        window = 2.0
        time.sleep(window)  # the measurement window: the thread must not wake by itself in it
        assert voluntary_switches(socket_thread) - before <= 1
        started = time.monotonic()
        assert get(server, "/hello")[0] == 200
        assert time.monotonic() - started < window / 2
        assert not closed_by_server(kept)
