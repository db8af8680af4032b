"""A lean HTTP/1.1 transport for the small requests a process sends by the thousand (a scheduler's
bindings and Events): keep-alive ``http.client`` connections to the API server of an ``ApiClient``'s
configuration, with its TLS material, credentials and headers.

The generated client sends every request through urllib3's pool manager, whose per-request bookkeeping
costs about three times the CPU of the HTTP exchange itself; a process whose throughput is its CPU per
pod pays that twice a pod. Lists and watches (few, large, streamed) stay on the generated client.
:func:`transport_of` gives ``None`` for a configuration this transport does not cover (a proxy, a TLS
server name override): the caller then uses the generated client. A request on a reused connection the
server closed meanwhile is sent again on a new one, as urllib3 and Go's transport do.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

MAX_IDLE = 32
"""Idle connections kept (per transport): one for each of a scheduler's binding threads (16 by default)
and then some; past it a connection is closed after its request (a new one costs a TLS handshake)."""
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class Response:
    """A whole answer: ``status``, ``reason``, ``data`` (the body) and ``headers``."""

    __slots__ = ("data", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: Mapping[str, str], data: bytes) -> None:
        self.status, self.reason, self.headers, self.data = status, reason, headers, data

    def getheaders(self) -> Mapping[str, str]:
        return self.headers


class Transport:
    def __init__(self, api_client: Any) -> None:
        cfg = api_client.configuration
        self.api_client = api_client
        url = urlsplit(cfg.host)
        self.host = url.hostname or "localhost"
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.context: ssl.SSLContext | None = _context(cfg) if self.tls else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None,
        query: Mapping[str, str] | None,
        headers: Mapping[str, str],
        timeout: float | tuple[float, float] | None,
    ) -> Response:
        target = self.prefix + path + (f"?{urlencode(query)}" if query else "")
        all_headers = dict(self.api_client.default_headers)
        all_headers.update(headers)
        # The credentials as the generated client applies them (a refreshed token included).
        self.api_client.update_params_for_auth(all_headers, [], ["BearerToken"], path, method, body)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        conn, reused = self._take(connect)
        try:
            try:
                resp = self._exchange(conn, method, target, body, all_headers, read)
            except _STALE:
                conn.close()
                if not reused:
                    raise
                conn, reused = self._connect(connect), False  # the server closed it while idle
                resp = self._exchange(conn, method, target, body, all_headers, read)
        except BaseException:
            conn.close()
            raise
        self._give_back(conn, resp)
        return resp

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- connections ------------------------------------------------------------------------------

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        read: float | None,
    ) -> Response:
        if conn.sock is not None:
            conn.sock.settimeout(read)
        conn.timeout = read
        conn.request(method, target, body=body, headers=dict(headers))
        raw = conn.getresponse()
        data = raw.read()
        resp = Response(raw.status, raw.reason, dict(raw.getheaders()), data)
        if raw.will_close:
            conn.close()
        return resp

    def _take(self, connect: float | None) -> tuple[http.client.HTTPConnection, bool]:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect(connect), False
            if not _dropped(conn):
                return conn, True
            conn.close()

    def _connect(self, connect: float | None) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self.tls:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=connect, context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=connect)
        try:
            conn.connect()
        except OSError as err:  # the address in the message, as urllib3's errors carry it
            raise ConnectionError(f"{self.host}:{self.port}: {err}") from err
        if conn.sock is not None:
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _give_back(self, conn: http.client.HTTPConnection, resp: Response) -> None:
        if conn.sock is None:
            return
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """An idle connection the server closed (readable with nothing to read: EOF), or one already shut."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _context(cfg: Any) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cfg.assert_hostname is False:
        ctx.check_hostname = False
    return ctx


_LOCK = threading.Lock()


def transport_of(api_client: Any) -> Transport | None:
    """The client's transport, made on first use; ``None`` when its configuration needs what only the
    generated client does (a proxy, a TLS server name, the legacy generator)."""
    slot: tuple[Transport | None] | None = getattr(api_client, "_koord_transport", None)
    if slot is not None:
        return slot[0]
    with _LOCK:
        slot = getattr(api_client, "_koord_transport", None)
        if slot is None:
            slot = (Transport(api_client) if _usable(api_client) else None,)
            api_client._koord_transport = slot
    return slot[0]


def _usable(api_client: Any) -> bool:
    cfg = getattr(api_client, "configuration", None)
    return (
        cfg is not None
        and hasattr(api_client, "param_serialize")
        and not getattr(cfg, "proxy", None)
        and not getattr(cfg, "tls_server_name", None)
        and not isinstance(getattr(cfg, "assert_hostname", None), str)
        and str(getattr(cfg, "host", "")).startswith(("http://", "https://"))
    )
