"""A raw-socket HTTP client for the server tests: exact bytes out, one Content-Length framed answer in."""

from __future__ import annotations

import socket

from koordlet.httpserver import AgentHTTPServer


def connect(server: AgentHTTPServer) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return s


def read_response(s: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response from ``s`` (Content-Length framed)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {buf!r}")
        buf += chunk
    top, _, rest = buf.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:length]


def get(server: AgentHTTPServer, path: str, *headers: str) -> tuple[int, dict[str, str], bytes]:
    with connect(server) as s:
        s.sendall(
            (
                "\r\n".join([f"GET {path} HTTP/1.1", "Host: t", "Connection: close", *headers]) + "\r\n\r\n"
            ).encode()
        )
        return read_response(s)
