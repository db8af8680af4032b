"""A lean HTTP/1.1 transport for the small requests a process sends by the thousand (a scheduler's
bindings and Events): keep-alive connections to the API server, with its TLS material, credentials and
headers; and :class:`LeanClient`, which sends everything through it, lists and watches included, so a
process that has one never imports the ``kubernetes`` package.

urllib3's per-request bookkeeping costs about three times the CPU of the exchange itself, and
``http.client`` parses every head through the ``email`` package: a whole answer is written and read here
(heads by :mod:`~koordshared.runtime.httpwire`); a watch stays on ``http.client``, and on an official
``ApiClient`` lists and watches stay on the generated client. :func:`transport_of` gives ``None`` for a
configuration this transport does not cover (a proxy, a TLS server name override). A request on a reused
connection the server closed meanwhile is sent again on a new one, as urllib3 and Go's transport do.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from koordshared.kube.kubeconfig import Endpoint, Token
from koordshared.runtime.httpwire import (
    HEAD_END,
    BadResponse,
    ResponseHead,
    encode_request,
    parse_response_head,
)

MAX_IDLE = 32
"""Idle connections kept (per transport): one for each of a scheduler's binding threads (16 by default)
and then some; past it a connection is closed after its request (a new one costs a TLS handshake)."""
MAX_HEAD = 64 * 1024
"""The longest response head read (as Go's ``net/http`` client's default ``MaxResponseHeaderBytes`` is
1 MiB and kube-apiserver's heads are a few hundred bytes, a longer one is not an API server)."""
_STALE = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
)


class _Conn:
    """One keep-alive connection for whole answers: a request written in one send, its answer framed
    and read here, the bytes read past it kept for the next."""

    __slots__ = ("buf", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock
        self.buf = bytearray()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def exchange(self, method: str, raw: bytes, timeout: float | None) -> tuple[ResponseHead, bytes]:
        sock = self.sock
        if sock is None:
            raise http.client.RemoteDisconnected("connection closed")
        sock.settimeout(timeout)
        sock.sendall(raw)
        head = self._head(first=True)
        while head.informational:
            head = self._head(first=False)
        if method == "HEAD" or head.length == 0:
            return head, b""
        if head.chunked:
            return head, self._chunked()
        if head.length is not None:
            return head, self._exactly(head.length)
        return head, self._to_end()

    def _fill(self) -> bool:
        assert self.sock is not None
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def _head(self, *, first: bool) -> ResponseHead:
        buf = self.buf
        while (end := buf.find(HEAD_END)) < 0:
            if len(buf) > MAX_HEAD:
                raise BadResponse(f"a response head over {MAX_HEAD} bytes")
            if not self._fill():
                if first and not buf:  # closed before answering: a stale connection, as http.client says
                    raise http.client.RemoteDisconnected("Remote end closed connection without response")
                raise BadResponse("the connection ended inside a response head")
        head = parse_response_head(bytes(buf[: end + 4]))
        del buf[: end + 4]
        return head

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise BadResponse(f"the connection ended {n - len(self.buf)} bytes short of the body")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _line(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            if len(self.buf) > MAX_HEAD or not self._fill():
                raise BadResponse("a chunked body without its line end")
        out = bytes(self.buf[:end])
        del self.buf[: end + 2]
        return out

    def _chunked(self) -> bytes:
        out = bytearray()
        buf = self.buf
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise BadResponse(f"a malformed chunk size {size_text[:20]!r}") from None
            if size == 0:
                while self._line():  # trailers, up to the blank line
                    pass
                return bytes(out)
            while len(buf) < size + 2:
                if not self._fill():
                    raise BadResponse("the connection ended inside a chunk")
            if buf[size : size + 2] != b"\r\n":
                raise BadResponse("a chunk longer than its size")
            with memoryview(buf) as view:  # copied once, into the answer; the view released before the del
                out += view[:size]
            del buf[: size + 2]

    def _to_end(self) -> bytes:
        while self._fill():
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out


class Response:
    """A whole answer: ``status``, ``reason``, ``data`` (the body) and ``headers``."""

    __slots__ = ("data", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: Mapping[str, str], data: bytes) -> None:
        self.status, self.reason, self.headers, self.data = status, reason, headers, data

    def getheaders(self) -> Mapping[str, str]:
        return self.headers


class StatusError(Exception):
    """A non-2xx answer on the lean path: ``status``, ``reason`` and the ``body``."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(f"({status}) {reason}")
        self.status, self.reason, self.body = status, reason, body


class Stream:
    """An answer whose body is read as it comes (a watch): the official response's ``stream``,
    ``release_conn`` and ``shutdown``. Its connection is never reused."""

    def __init__(self, conn: http.client.HTTPConnection, raw: http.client.HTTPResponse) -> None:
        self.conn, self.raw = conn, raw
        self.status, self.reason = raw.status, raw.reason

    @property
    def data(self) -> bytes:
        return self.raw.read()

    def stream(self, amt: int | None = None, **_urllib3: Any) -> Iterator[bytes]:
        """The body as it arrives (urllib3's ``decode_content`` needs no counterpart: no encoding is
        asked for)."""
        while True:
            chunk = self.raw.read1(amt or 65536)
            if not chunk:
                return
            yield chunk

    def release_conn(self) -> None:
        self.conn.close()

    def shutdown(self) -> None:
        """Unblock a reader on another thread (a closed socket alone would not wake it)."""
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already gone
                pass
        self.conn.close()


Headers = Callable[[str, str, bytes | None], dict[str, str]]
"""A request's method, path and body -> the headers it carries before its own (user agent,
credentials)."""


class Transport:
    def __init__(self, url: str, context: ssl.SSLContext | None, headers: Headers) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "localhost"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.context = context if self.tls else None
        self._headers = headers
        default = 443 if self.tls else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = name if self.port == default else f"{name}:{self.port}"
        self._idle: list[_Conn] = []
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
        target, all_headers = self._target(method, path, body, query, headers)
        raw = encode_request(method, target, self.host_header, all_headers, body)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        conn, reused = self._take(connect)
        try:
            try:
                head, data = conn.exchange(method, raw, read)
            except _STALE:
                conn.close()
                if not reused:
                    raise
                conn = _Conn(self._socket(connect))  # the server closed it while idle
                head, data = conn.exchange(method, raw, read)
        except BaseException:
            conn.close()
            raise
        if head.keep_alive and not conn.buf:
            self._give_back(conn)
        else:
            conn.close()
        return Response(head.status, head.reason, head.headers, data)

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None,
        headers: Mapping[str, str],
        timeout: float | tuple[float, float] | None,
    ) -> Stream:
        """A request whose answer is read as it comes, on a connection of its own."""
        target, all_headers = self._target(method, path, None, query, headers)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        conn = self._stream_connection(connect)
        try:
            if conn.sock is not None:
                conn.sock.settimeout(read)
            conn.timeout = read
            conn.request(method, target, headers=all_headers)
            return Stream(conn, conn.getresponse())
        except BaseException:
            conn.close()
            raise

    def _target(
        self,
        method: str,
        path: str,
        body: bytes | None,
        query: Mapping[str, str] | None,
        headers: Mapping[str, str],
    ) -> tuple[str, dict[str, str]]:
        all_headers = self._headers(method, path, body)
        all_headers.update(headers)
        return self.prefix + path + (f"?{urlencode(query)}" if query else ""), all_headers

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- connections ------------------------------------------------------------------------------

    def _take(self, connect: float | None) -> tuple[_Conn, bool]:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return _Conn(self._socket(connect)), False
            if not _dropped(conn.sock):
                return conn, True
            conn.close()

    def _socket(self, connect: float | None) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=connect)
        except OSError as err:  # the address in the message, as urllib3's errors carry it
            raise ConnectionError(f"{self.host}:{self.port}: {err}") from err
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                return self.context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _stream_connection(self, connect: float | None) -> http.client.HTTPConnection:
        """A connection of its own for an answer read as it comes (``http.client`` frames it)."""
        conn: http.client.HTTPConnection
        if self.tls:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=connect, context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=connect)
        conn.sock = self._socket(connect)
        return conn

    def _give_back(self, conn: _Conn) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()


def _dropped(sock: socket.socket | None) -> bool:
    """An idle connection the server closed (readable with nothing to read: EOF), or one already shut."""
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _official_headers(api_client: Any) -> Headers:
    def headers(method: str, path: str, body: bytes | None) -> dict[str, str]:
        out = dict(api_client.default_headers)
        # The credentials as the generated client applies them (a refreshed token included).
        api_client.update_params_for_auth(out, [], ["BearerToken"], path, method, body)
        return out

    return headers


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
            made = None
            if _usable(api_client):
                cfg = api_client.configuration
                tls = str(cfg.host).startswith("https://")
                made = Transport(cfg.host, _context(cfg) if tls else None, _official_headers(api_client))
            slot = (made,)
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


class LeanClient:
    """A client of one :class:`~koordshared.kube.kubeconfig.Endpoint` that sends every request, lists and
    watches included, on the lean transport (:func:`koordshared.kube.client.send`); ``source`` is the
    kubeconfig it came from (``""``: in-cluster), for :func:`koordshared.kube.client.official_client`."""

    def __init__(self, endpoint: Endpoint, *, user_agent: str = "", source: str = "") -> None:
        self.endpoint = endpoint
        self.user_agent = user_agent
        self.source = source
        self._token = Token(endpoint)
        self._token()  # a token file that cannot be read fails the start, not the first request
        tls = endpoint.server.startswith("https://")
        self.transport = Transport(
            endpoint.server, endpoint.ssl_context() if tls else None, self._base_headers
        )
        self.official: Any = None

    def _base_headers(self, method: str, path: str, body: bytes | None) -> dict[str, str]:
        out = {"User-Agent": self.user_agent} if self.user_agent else {}
        token = self._token()
        if token:
            out["Authorization"] = f"Bearer {token}"
        return out

    def twin(self) -> LeanClient:
        """The same endpoint and user agent on connections of its own."""
        return LeanClient(self.endpoint, user_agent=self.user_agent, source=self.source)

    def close(self) -> None:
        self.transport.close()
        if self.official is not None:
            self.official.close()
