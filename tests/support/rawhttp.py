"""Raw-socket HTTP for tests and benches: a client (exact bytes out, one Content-Length framed answer in)
for the server tests, and the request reader of the scripted servers that answer the clients' tests."""

from __future__ import annotations

import socket

from koordshared.runtime.httpserver import ProcessHTTPServer


def connect(server: ProcessHTTPServer) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return s


def _headers(lines: list[str]) -> dict[str, str]:
    """The header fields of a message's head lines (its first line, the request or status line, skipped),
    names lower-cased."""
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}


def read_response(s: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response from ``s`` (Content-Length framed), reading no byte past it: pipelined answers that
    arrive together stay in the socket for the next call."""
    top = b""
    while not top.endswith(b"\r\n\r\n"):
        byte = s.recv(1)  # heads are small; a bigger read could swallow the next answer
        if not byte:
            raise ConnectionError(f"closed after {top!r}")
        top += byte
    lines = top[:-4].decode("latin-1").split("\r\n")
    headers = _headers(lines)
    length = int(headers.get("content-length", "0"))
    body = b""
    while len(body) < length:
        chunk = s.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def read_request(conn: socket.socket, buf: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The next request on ``conn`` after the bytes ``buf`` already read: ``(head, body, rest)``, the
    head through its blank line, the body by its Content-Length, ``rest`` read past it; ``None`` when
    the connection ends first."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, buf = buf.partition(b"\r\n\r\n")
    length = int(_headers(head.decode("latin-1").split("\r\n")).get("content-length", "0"))
    while len(buf) < length:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    return head + b"\r\n\r\n", buf[:length], buf[length:]


def get(server: ProcessHTTPServer, path: str, *headers: str) -> tuple[int, dict[str, str], bytes]:
    with connect(server) as s:
        s.sendall(
            (
                "\r\n".join([f"GET {path} HTTP/1.1", "Host: t", "Connection: close", *headers]) + "\r\n\r\n"
            ).encode()
        )
        return read_response(s)
