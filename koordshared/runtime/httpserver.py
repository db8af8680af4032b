"""The HTTP endpoint of the agent and the cluster processes: ``/metrics``, the probes, and what the daemon
registers (``/nodemetric``, ``/events``, ``/plugins`` on the agent).

Routes are plain functions of the query returning ``(status, content type, body)`` or a :class:`Rendered`
payload (bytes made once elsewhere, e.g. per collection, served as they are, gzip-encoded when the producer
keeps that form and the client accepts it). It binds loopback by default (koordlet binds every interface with
no authentication: a weak spot not copied); an address without a host (``--addr=:9316``, Koordinator's chart)
binds every interface, as Go's listener does. Who may call: :mod:`koordshared.runtime.httpaccess` (TLS,
TokenReview and SubjectAccessReview of bearer tokens); probe routes (``/healthz``, ``/readyz``) stay open.
Connections, threads and limits: :mod:`koordshared.runtime.httpconn`.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from koordshared.runtime.errors import ConfigError
from koordshared.runtime.httpaccess import DelegatingAuth
from koordshared.runtime.httpconn import ConnectionLoop, Limits
from koordshared.runtime.httpwire import RequestHead, encode_response

log = logging.getLogger(__name__)

Response = tuple[int, str, bytes]
_TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Rendered:
    """An answer made ahead of the request: served as is, or as ``gzip`` when the producer keeps that
    form and the client accepts it."""

    status: int
    content_type: str
    body: bytes
    gzip: bytes | None = None


Route = Callable[[dict[str, list[str]]], Response | Rendered]


def json_response(obj: Any, status: int = 200) -> Response:
    return status, "application/json", json.dumps(obj, indent=1, sort_keys=False).encode() + b"\n"


def text_response(text: str, status: int = 200) -> Response:
    return status, _TEXT, text.encode()


class ProcessHTTPServer:
    """The HTTP endpoint every process serves (the agent and the cluster processes): routes requests to
    registered handlers; ``start()`` serves on background threads."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry | None,
        *,
        tls: ssl.SSLContext | None = None,
        auth: DelegatingAuth | None = None,
        limits: Limits | None = None,
        flag: str = "addr",
    ) -> None:
        self.scheme = "https" if tls is not None else "http"
        self._auth = auth
        self._routes: dict[str, Route] = {}
        self._probes: set[str] = set()
        if registry is not None:  # None: a side endpoint (the agent's pprof) with only its own routes
            self.route("/metrics", lambda _q: (200, CONTENT_TYPE_LATEST, generate_latest(registry)))
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            listener = socket.create_server((host, port), family=family, backlog=128)
        except OSError as err:
            raise ConfigError(
                f"--{flag} {host}:{port}: cannot listen: {err.strerror}; pick a free port"
            ) from err
        self._loop = ConnectionLoop(
            listener, respond=self._respond, probe=self._probe, tls=tls, limits=limits or Limits()
        )

    @property
    def port(self) -> int:
        return int(self._loop.address[1])

    @property
    def limits(self) -> Limits:
        return self._loop.limits

    def route(self, path: str, handler: Route, *, probe: bool = False) -> None:
        """Serve ``handler`` at ``path``; a ``probe`` route is open to anyone and must answer at once."""
        self._routes[path] = handler
        if probe:
            self._probes.add(path)
        else:
            self._probes.discard(path)

    def open_connections(self) -> int:
        return self._loop.open_connections()

    def start(self) -> None:
        self._loop.start()

    def shutdown(self) -> None:
        self._loop.shutdown()

    def _probe(self, req: RequestHead) -> bytes | None:
        if req.path not in self._probes:
            return None
        status, ctype, body, extra = self._call(req, self._routes[req.path])
        return encode_response(
            status, ctype, body, keep_alive=req.keep_alive, head_only=req.method == "HEAD", extra=extra
        )

    def _respond(self, req: RequestHead) -> bytes:
        status, ctype, body, extra = self._answer(req)
        log.debug("http: %s %s -> %d (%d bytes)", req.method, req.path, status, len(body))
        return encode_response(
            status, ctype, body, keep_alive=req.keep_alive, head_only=req.method == "HEAD", extra=extra
        )

    def _answer(self, req: RequestHead) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        if self._auth is not None:
            denied = self._auth.check(req.method, req.path, req.header("authorization"))
            if denied is not None:
                extra = [("WWW-Authenticate", 'Bearer realm="koordlet"')] if denied.status == 401 else []
                return denied.status, _TEXT, (denied.message + "\n").encode(), extra
        route = self._routes.get(req.path)
        if route is None:
            return 404, _TEXT, ("not found; try " + " ".join(sorted(self._routes)) + "\n").encode(), []
        return self._call(req, route)

    def _call(self, req: RequestHead, route: Route) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        try:
            answer = route(req.query)
        except Exception as err:
            log.exception("HTTP %s failed", req.path)
            return 500, _TEXT, f"internal error: {err!r}\n".encode(), []
        if not isinstance(answer, Rendered):
            return (*answer, [])
        if answer.gzip is None:
            return answer.status, answer.content_type, answer.body, []
        if req.accepts("gzip"):
            return (
                answer.status,
                answer.content_type,
                answer.gzip,
                [
                    ("Content-Encoding", "gzip"),
                    ("Vary", "Accept-Encoding"),
                ],
            )
        return answer.status, answer.content_type, answer.body, [("Vary", "Accept-Encoding")]
