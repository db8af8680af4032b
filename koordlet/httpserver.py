"""The agent's HTTP endpoint: ``/metrics``, ``/healthz``, ``/readyz``, ``/nodemetric``, ``/events``.

A small threaded stdlib server; routes are plain functions returning ``(status, content type, body)``
registered by the daemon. It binds loopback by default (koordlet binds every interface with no authn:
a known weak spot we do not copy); an address without a host (``--addr=:9316``, Koordinator's chart)
binds every interface, as Go's listener does.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from koordlet.errors import ConfigError

log = logging.getLogger(__name__)


class Encodable(Protocol):
    """A body rendered ahead of time (``/metrics``), sent gzip-compressed to clients that accept it."""

    def identity(self) -> bytes: ...

    def gzip(self) -> bytes: ...


Response = tuple[int, str, bytes]
Route = Callable[[dict[str, list[str]]], "tuple[int, str, bytes | Encodable]"]


def json_response(obj: Any, status: int = 200) -> Response:
    return status, "application/json", json.dumps(obj, indent=1, sort_keys=False).encode() + b"\n"


def text_response(text: str, status: int = 200) -> Response:
    return status, "text/plain; charset=utf-8", text.encode()


def accepts_gzip(accept_encoding: str | None) -> bool:
    """``Accept-Encoding`` names gzip (or ``*``) with a non-zero quality (RFC 9110 12.5.3)."""
    for item in (accept_encoding or "").split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0.0:
            return True
    return False


class _Server(ThreadingHTTPServer):
    # socketserver's listen backlog of 5 drops the SYNs of a sixth simultaneous client, which retries
    # after 1 s: 20 concurrent scrapers saw 1-2 s tails for a 1 ms response. 128 is Linux's somaxconn floor.
    request_queue_size = 128


class AgentHTTPServer:
    """Routes requests to registered handlers; ``start()`` serves in a daemon thread."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry) -> None:
        self._routes: dict[str, Route] = {}
        self.registry = registry
        self.route("/metrics", lambda _q: (200, CONTENT_TYPE_LATEST, generate_latest(self.registry)))
        routes = self._routes

        class Handler(BaseHTTPRequestHandler):
            server_version = "koordlet"

            def do_GET(self) -> None:
                body: bytes | Encodable
                url = urlsplit(self.path)
                route = routes.get(url.path.rstrip("/") or "/")
                if route is None:
                    status, ctype, body = text_response(
                        "not found; try " + " ".join(sorted(routes)) + "\n", 404
                    )
                else:
                    try:
                        status, ctype, body = route(parse_qs(url.query))
                    except Exception as err:
                        log.exception("HTTP %s failed", url.path)
                        status, ctype, body = text_response(f"internal error: {err!r}\n", 500)
                encoding = None
                if isinstance(body, bytes):
                    data = body
                elif accepts_gzip(self.headers.get("Accept-Encoding")):
                    data, encoding = body.gzip(), "gzip"
                else:
                    data = body.identity()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                if not isinstance(body, bytes):
                    self.send_header("Vary", "Accept-Encoding")
                if encoding is not None:
                    self.send_header("Content-Encoding", encoding)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        try:
            self._server = _Server((host, port), Handler)
        except OSError as err:
            raise ConfigError(
                f"--addr {host}:{port}: cannot listen: {err.strerror}; pick a free port"
            ) from err
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def route(self, path: str, handler: Route) -> None:
        self._routes[path] = handler

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        if self._thread is not None:  # socketserver's shutdown() waits forever for a loop never started
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(2.0)
