"""The extender's HTTP server: kube-scheduler's verbs, the probes, ``/metrics`` and the debug route.

``POST <prefix>/filter``, ``<prefix>/prioritize``, ``<prefix>/bind`` (the last path segment names the
verb, so any ``urlPrefix`` works); ``GET /healthz``, ``/readyz``, ``/metrics``,
``/debug/nodes/<node>[?pod=<namespace>/<name>]``. HTTP/1.1 with keep-alive, since kube-scheduler reuses
its connection for every call; optional TLS, with client certificates required when a client CA is
given. Error answers keep the verb's shape: a filter or bind error is a 200 carrying ``Error`` (the
protocol's own error path, which kube-scheduler logs with the message); prioritize has no error field,
so its errors are non-200 statuses.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from koord.scheduler.extender.verbs import Extender, NotReady
from koord.scheduler.extender.wire import (
    WireError,
    decode_args,
    decode_binding,
    encode_binding,
    encode_filter,
    encode_priorities,
)
from koord.scheduler.framework.runtime import PluginFailure
from koordshared.runtime.errors import ConfigError

log = logging.getLogger(__name__)

MAX_BODY = 256 * 2**20
"""A 5000-node NodeList (``nodeCacheCapable: false``) is tens of MiB; anything beyond this is refused."""
IDLE_TIMEOUT = 120.0
JSON = "application/json"
Answer = tuple[int, str, bytes]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.conns_lock:
            self.conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.conns_lock:
            self.conns.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self.conns_lock:
            conns = list(self.conns)
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ExtenderServer:
    """``start()`` serves on a thread; ``shutdown()`` stops accepting and cuts open connections."""

    def __init__(
        self,
        host: str,
        port: int,
        extender: Extender,
        *,
        ready: Callable[[], bool],
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.extender = extender
        self._ready = ready
        self.scheme = "https" if tls is not None else "http"
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "koord-scheduler-extender"
            timeout = IDLE_TIMEOUT

            def setup(self) -> None:
                super().setup()
                # Headers and body go out as two writes; with Nagle on, the second waits for the
                # peer's delayed ACK (40 ms per call).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, answer: Answer) -> None:
                status, ctype, body = answer
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                verb = url.path.rstrip("/").rsplit("/", 1)[-1]
                length = self.headers.get("Content-Length")
                if length is None or not length.isdecimal():
                    self.close_connection = True
                    self._send((411, "text/plain", b"Content-Length required\n"))
                    return
                if int(length) > MAX_BODY:
                    self.close_connection = True
                    self._send((413, "text/plain", b"request body too large\n"))
                    return
                body = self.rfile.read(int(length))
                self._send(server.post(verb, body))

            def do_GET(self) -> None:
                self._send(server.get(urlsplit(self.path)))

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        try:
            self._httpd = _Server((host, port), Handler)
        except OSError as err:
            raise ConfigError(
                f"--addr {host}:{port}: cannot listen: {err.strerror}; pick a free port"
            ) from err
        if tls is not None:
            # The handshake happens on the connection's own thread (first read), not in accept().
            self._httpd.socket = tls.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="extender-http", daemon=True
        )
        self._thread.start()

    def shutdown(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(2.0)
            self._thread = None
        self._httpd.cut_connections()
        self._httpd.server_close()

    # ---- routing ----------------------------------------------------------------------------------

    def post(self, verb: str, body: bytes) -> Answer:
        handler = {"filter": self._filter, "prioritize": self._prioritize, "bind": self._bind}.get(verb)
        if handler is None:
            return 404, "text/plain", b"unknown verb; POST .../filter, .../prioritize or .../bind\n"
        metrics = self.extender.metrics
        start = time.perf_counter()
        status, result, answer = handler(body)
        metrics.request_duration.labels(verb).observe(time.perf_counter() - start)
        metrics.requests.labels(verb, result).inc()
        return status, JSON, answer

    def _filter(self, body: bytes) -> tuple[int, str, bytes]:
        try:
            args = decode_args(body)
        except WireError as err:
            return 400, "bad_request", encode_filter(None, [], {}, {}, str(err))
        try:
            ans = self.extender.filter(args)
        except NotReady as err:
            return 200, "not_ready", encode_filter(args, [], {}, {}, f"koord-scheduler-extender: {err}")
        except PluginFailure as err:
            return 200, "error", encode_filter(args, [], {}, {}, str(err))
        except Exception as err:
            log.exception("filter failed")
            return 500, "error", encode_filter(args, [], {}, {}, f"internal error: {err!r}")
        return 200, "ok", encode_filter(args, ans.passed, ans.failed, ans.unresolvable)

    def _prioritize(self, body: bytes) -> tuple[int, str, bytes]:
        try:
            args = decode_args(body)
        except WireError as err:
            return 400, "bad_request", _error(str(err))
        try:
            scores = self.extender.prioritize(args)
        except NotReady as err:
            return 503, "not_ready", _error(str(err))
        except PluginFailure as err:
            return 500, "error", _error(str(err))
        except Exception as err:
            log.exception("prioritize failed")
            return 500, "error", _error(f"internal error: {err!r}")
        return 200, "ok", encode_priorities(scores.hosts, scores.scores)

    def _bind(self, body: bytes) -> tuple[int, str, bytes]:
        try:
            b = decode_binding(body)
        except WireError as err:
            return 400, "bad_request", encode_binding(str(err))
        try:
            error = self.extender.bind(b)
        except Exception as err:
            log.exception("bind failed")
            return 500, "error", encode_binding(f"internal error: {err!r}")
        return 200, "error" if error else "ok", encode_binding(error)

    def get(self, url: Any) -> Answer:
        path = url.path.rstrip("/") or "/"
        if path == "/healthz":
            return 200, "text/plain", b"ok\n"
        if path == "/readyz":
            return (
                (200, "text/plain", b"ok\n") if self._ready() else (503, "text/plain", b"caches not synced\n")
            )
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.extender.metrics.registry)
        if path.startswith("/debug/nodes/"):
            node = unquote(path[len("/debug/nodes/") :])
            pod = None
            ref = (parse_qs(url.query).get("pod") or [""])[0]
            if ref:
                ns, _, name = ref.rpartition("/")
                pod = self.extender.handle.get_pod(ns or "default", name)
                if pod is None:
                    return 404, "text/plain", f"pod {ref} is not in the extender's cache\n".encode()
            body = json.dumps(self.extender.explain(node, pod), indent=1, default=str).encode() + b"\n"
            return 200, JSON, body
        return 404, "text/plain", b"not found; try /healthz /readyz /metrics /debug/nodes/<node>\n"


def _error(message: str) -> bytes:
    return json.dumps({"Error": message}).encode()
