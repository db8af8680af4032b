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
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from koordlet.errors import ConfigError

log = logging.getLogger(__name__)

Response = tuple[int, str, bytes]
Route = Callable[[dict[str, list[str]]], Response]


def json_response(obj: Any, status: int = 200) -> Response:
    return status, "application/json", json.dumps(obj, indent=1, sort_keys=False).encode() + b"\n"


def text_response(text: str, status: int = 200) -> Response:
    return status, "text/plain; charset=utf-8", text.encode()


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
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
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
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(2.0)
