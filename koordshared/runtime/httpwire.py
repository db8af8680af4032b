"""HTTP/1.x on the wire, both ends, as pure functions over whole heads: the processes' server parses a
request head and encodes a response; the lean API client encodes a request and parses a response head.

Each side reads bytes itself and hands a complete head here, so the limits are enforced before any
parsing: a head longer than the reader's limit never reaches :func:`parse_head`. The server understands
only what it serves: ``GET`` and ``HEAD`` without a body, HTTP/1.0 and 1.1, keep-alive as each version
defaults to it; anything else is a :class:`BadRequest` carrying the status to answer (400, 405, 413, 501,
505). The client side reads what kube-apiserver answers (Go's ``net/http``): a status line, headers, and a
body framed by ``Content-Length``, ``chunked`` or the connection's end; anything else is a
:class:`BadResponse`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

MAX_HEADERS = 100
"""As http.client: more header lines than this is an abuse, not a client."""
HEAD_END = b"\r\n\r\n"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 5.6.2's ``token``: a method or a header name."""
_METHODS = ("GET", "HEAD")
_BODY_METHODS = frozenset(("POST", "PUT", "PATCH"))
"""Methods that always carry ``Content-Length`` (0 without a body), as ``http.client`` sends them."""
_FRAMING = frozenset(("content-length", "transfer-encoding", "connection"))
_LINE_BREAK = re.compile(r"[\r\n\x00]")
_UNSAFE_TARGET = re.compile(r"[\x00-\x20\x7f]")


class BadResponse(Exception):
    """An answer that is not HTTP/1.x as RFC 9112 frames it (the connection cannot be reused)."""


class BadRequest(Exception):
    """A request the server refuses; ``status`` is the answer, the message its body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A parsed request line and headers (names lowercased, repeated ones joined with ``", "``)."""

    method: str
    path: str
    """The target's path with trailing slashes removed (``/`` stays ``/``): what routes are keyed by."""
    query: dict[str, list[str]]
    version: str
    headers: Mapping[str, str]
    keep_alive: bool

    def header(self, name: str) -> str:
        return self.headers.get(name, "")

    def accepts(self, coding: str) -> bool:
        """Whether ``Accept-Encoding`` admits ``coding``, by name or ``*``, with a non-zero quality (RFC 9110
        12.5.3); an unreadable quality counts as 0."""
        for item in self.header("accept-encoding").split(","):
            name, _, params = item.partition(";")
            if name.strip().lower() not in (coding, "*"):
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


def _is_token(text: str) -> bool:
    return _TOKEN.fullmatch(text) is not None


def parse_head(raw: bytes) -> RequestHead:
    """Parse a request head (through the blank line); raises :class:`BadRequest`."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as err:  # latin-1 decodes every byte; kept for the type checker
        raise BadRequest(400, "undecodable request") from err
    lines = text.split("\r\n")
    while lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise BadRequest(400, "empty request")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(505, f"unsupported protocol {version[:16]!r}")
    if not _is_token(method):
        raise BadRequest(400, "malformed method")
    if len(lines) - 1 > MAX_HEADERS:
        raise BadRequest(400, "too many header lines")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _is_token(name):
            raise BadRequest(400, "malformed header line")
        key, value = name.lower(), value.strip(" \t")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if method not in _METHODS:
        raise BadRequest(405, f"method {method[:16]} not allowed; use GET")
    if headers.get("transfer-encoding") or headers.get("content-length", "0").strip() not in ("", "0"):
        raise BadRequest(413, "this server takes no request body")
    if not target.startswith("/") and not target.startswith(("http://", "https://")):
        raise BadRequest(400, "malformed request target")
    url = urlsplit(target)
    connection = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return RequestHead(
        method=method,
        path=url.path.rstrip("/") or "/",
        query=parse_qs(url.query),
        version=version,
        headers=headers,
        keep_alive=keep,
    )


def encode_request(
    method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None
) -> bytes:
    """Request line, ``Host``, ``headers`` and ``Content-Length``, then the body: one buffer for one
    ``sendall`` (a head and body sent apart meet Nagle's algorithm and the peer's delayed ACK). A target
    or header that would end a line early is refused (``ValueError``), as ``http.client`` refuses it."""
    fields = "".join(headers) + "".join(headers.values()) + host + method
    if _LINE_BREAK.search(fields) or _UNSAFE_TARGET.search(target):
        raise ValueError(f"a line break or control character in the request to {target[:80]!r}")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    if body is not None or method in _BODY_METHODS:
        lines.append(f"Content-Length: {len(body or b'')}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return raw + body if body else raw


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """A parsed status line and headers (names as the server spelled them, repeated ones joined with
    ``", "``) with the body's framing read from them."""

    status: int
    reason: str
    headers: dict[str, str]
    length: int | None
    """``Content-Length``; ``None`` without one (chunked, or until the connection ends)."""
    chunked: bool
    keep_alive: bool

    @property
    def informational(self) -> bool:
        """A 1xx answer: another head follows for the same request (101 is never asked for here)."""
        return 100 <= self.status < 200


def parse_response_head(raw: bytes) -> ResponseHead:
    """Parse a response head (through the blank line); raises :class:`BadResponse`."""
    lines = raw.decode("latin-1").split("\r\n")
    while lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise BadResponse("empty response head")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if version not in ("HTTP/1.0", "HTTP/1.1") or len(code) != 3 or not code.isdigit():
        raise BadResponse(f"malformed status line {lines[0][:80]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise BadResponse("too many header lines")
    headers: dict[str, str] = {}
    framing: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _is_token(name):
            raise BadResponse(f"malformed header line {line[:80]!r}")
        value = value.strip(" \t")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
        key = name.lower()
        if key in _FRAMING:
            framing[key] = f"{framing[key]}, {value}" if key in framing else value
    status = int(code)
    chunked = "chunked" in framing.get("transfer-encoding", "").lower()
    length = None
    if not chunked and "content-length" in framing:
        # Repeats of one value are allowed (RFC 9110 8.6); differing ones are a framing attack.
        values = {v.strip() for v in framing["content-length"].split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise BadResponse(f"malformed Content-Length {framing['content-length'][:40]!r}")
        length = int(values.pop())
    connection = {t.strip().lower() for t in framing.get("connection", "").split(",")}
    keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    # Without a length the body runs to the connection's end (RFC 9112 6.3), which then cannot be reused.
    bodiless = status in (204, 304) or 100 <= status < 200
    keep = keep and (chunked or length is not None or bodiless)
    return ResponseHead(status, reason, headers, 0 if bodiless else length, chunked, keep)


def encode_response(
    status: int,
    content_type: str,
    body: bytes,
    *,
    keep_alive: bool,
    head_only: bool = False,
    extra: Sequence[tuple[str, str]] = (),
) -> bytes:
    """Status line, headers and (unless ``head_only``) the body, as one buffer for one ``sendall``."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    lines = [
        f"HTTP/1.1 {status} {reason}",
        "Server: koordlet",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in extra),
    ]
    lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + body
