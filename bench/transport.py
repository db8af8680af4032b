"""The client's CPU per API request: the lean transport beside ``http.client`` (what the transport used
before it read answers itself) and beside a floor that only writes the request's bytes and reads the
answer's (no request built, no head parsed), all against one loopback server in another process that
answers as kube-apiserver does (its headers; a Binding's 201 with a short Status, an Event's 201, and a
list of 200 pods sent ``chunked`` as Go's server sends a body it had not sized).

Plain TCP: the TLS record work is the same bytes for every client, so leaving it out shows what the
clients differ in. Per case and client: the median over rounds of the calling thread's CPU per request
(``time.thread_time``) and the wall time per exchange, with ``ratio`` = CPU ÷ the floor's.

    python -m bench.transport [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from koordshared.kube.transport import Transport
from koordshared.runtime.httpwire import encode_request
from tests.support.rawhttp import read_request

NAME = "transport"
GO_HEADERS = (
    "Audit-Id: 6f1c2a4e-9a53-4d5c-8f0e-0d1b7a5e2c11\r\n"
    "Cache-Control: no-cache, private\r\n"
    "Content-Type: application/json\r\n"
    "X-Kubernetes-Pf-Flowschema-Uid: 3c5e7d0a-0b5e-4d56-9a8d-6b4d0f7e1a22\r\n"
    "X-Kubernetes-Pf-Prioritylevel-Uid: 8a0f6c1e-2d3b-4f4a-b7c9-1e2f3a4b5c6d\r\n"
    "Date: Mon, 07 Dec 2026 03:00:00 GMT\r\n"
)


def _answer(status: str, body: bytes, *, chunked: bool = False) -> bytes:
    if not chunked:
        return f"HTTP/1.1 {status}\r\n{GO_HEADERS}Content-Length: {len(body)}\r\n\r\n".encode() + body
    chunks = [body[i : i + 4096] for i in range(0, len(body), 4096)]
    head = f"HTTP/1.1 {status}\r\n{GO_HEADERS}Transfer-Encoding: chunked\r\n\r\n".encode()
    return head + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


def _pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{i:05d}", "namespace": "bench", "uid": f"uid-{i:032d}", "labels": {}},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending"},
    }


STATUS = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
EVENT = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "p-00001.17e0a1b2c3d4e5f6", "namespace": "bench"},
    "eventTime": "2026-12-07T03:00:00.000000Z",
    "reason": "Scheduled",
    "action": "Binding",
    "note": "Successfully assigned bench/p-00001 to node-00042",
    "regarding": {"kind": "Pod", "namespace": "bench", "name": "p-00001", "uid": "uid-1"},
    "reportingController": "koord-scheduler",
    "reportingInstance": "koord-scheduler-bench",
    "type": "Normal",
}
CASES: dict[str, tuple[str, str, bytes | None, bytes]] = {
    "binding": (
        "POST",
        "/api/v1/namespaces/bench/pods/p-00001/binding",
        json.dumps({"target": {"kind": "Node", "name": "node-00042"}}).encode(),
        _answer("201 Created", STATUS.encode()),
    ),
    "event": (
        "POST",
        "/apis/events.k8s.io/v1/namespaces/bench/events",
        json.dumps(EVENT).encode(),
        _answer("201 Created", json.dumps(EVENT).encode()),
    ),
    "list 200 pods": (
        "GET",
        "/api/v1/namespaces/bench/pods",
        None,
        _answer("200 OK", json.dumps({"items": [_pod(i) for i in range(200)]}).encode(), chunked=True),
    ),
}


def _serve(listener: socket.socket, answers: dict[str, bytes]) -> None:
    """A thread per kept-alive connection: read a head and its body, answer by path."""

    def follow(conn: socket.socket) -> None:
        buf = b""
        while (request := read_request(conn, buf)) is not None:
            head, _, buf = request
            conn.sendall(answers[head.split(b" ", 2)[1].decode()])
        conn.close()

    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=follow, args=(conn,), daemon=True).start()


def _headers(method: str, path: str, body: bytes | None) -> dict[str, str]:
    return {"User-Agent": "koord-scheduler/bench", "Authorization": "Bearer " + "t" * 900}


def _clients(port: int) -> dict[str, Callable[[str, str, bytes | None], bytes]]:
    lean = Transport(f"http://127.0.0.1:{port}", None, _headers)
    std = http.client.HTTPConnection("127.0.0.1", port)
    floor = socket.create_connection(("127.0.0.1", port))
    floor.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    extra = {"Accept": "application/json", "Content-Type": "application/json"}
    # The floor's requests are encoded once, ahead: it pays only for writing and reading the bytes.
    host = f"127.0.0.1:{port}"
    wire = {
        path: (
            encode_request(method, path, host, {**_headers(method, path, body), **extra}, body),
            len(answer),
        )
        for method, path, body, answer in CASES.values()
    }

    def by_lean(method: str, path: str, body: bytes | None) -> bytes:
        resp = lean.request(method, path, body=body, query=None, headers=extra, timeout=10)
        return resp.data

    def by_http_client(method: str, path: str, body: bytes | None) -> bytes:
        std.request(method, path, body=body, headers={**_headers(method, path, body), **extra})
        raw = std.getresponse()
        data = raw.read()
        dict(raw.getheaders())  # what the transport kept of each answer
        return data

    def by_floor(method: str, path: str, body: bytes | None) -> bytes:
        raw, size = wire[path]
        floor.sendall(raw)
        got = 0
        while got < size:
            got += len(floor.recv(65536))
        return b""

    return {"floor": by_floor, "lean": by_lean, "http.client": by_http_client}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a few seconds)")
    opts = parser.parse_args()
    per_round, rounds = (300, 5) if opts.quick else (1000, 9)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    answers = {path: answer for _, path, _, answer in CASES.values()}
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(listener, answers), daemon=True)
    server.start()
    listener.close()
    rows: list[dict[str, Any]] = []
    clients = _clients(port)
    try:
        for case, (method, path, body, _) in CASES.items():
            cpu: dict[str, list[float]] = {}
            wall: dict[str, list[float]] = {}
            for _ in range(rounds):
                for who, fn in clients.items():
                    fn(method, path, body)
                    c0, w0 = time.thread_time(), time.perf_counter()
                    for _ in range(per_round):
                        fn(method, path, body)
                    cpu.setdefault(who, []).append((time.thread_time() - c0) / per_round)
                    wall.setdefault(who, []).append((time.perf_counter() - w0) / per_round)
            floor = statistics.median(cpu["floor"])
            for who, spent in cpu.items():
                c, w = statistics.median(spent), statistics.median(wall[who])
                rows.append(
                    {"case": case, "client": who, "cpu_us": c * 1e6, "wall_us": w * 1e6, "ratio": c / floor}
                )
    finally:
        server.terminate()
        server.join(5)
    print(f"{'case':<14} {'client':<12} {'CPU us/req':>10} {'wall us/req':>11} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['case']:<14} {r['client']:<12} {r['cpu_us']:>10.1f} {r['wall_us']:>11.1f} {r['ratio']:>6.2f}"
        )
    print(json.dumps({"bench": NAME, "per_round": per_round, "rounds": rounds, "rows": rows}))


if __name__ == "__main__":
    main()
