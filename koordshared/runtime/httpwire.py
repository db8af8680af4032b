"""HTTP/1.x on the wire for the agent's server: parse a request head, encode a response (pure functions).

The server reads bytes itself (non-blocking, on one thread) and hands a complete head here, so the limits
are enforced before any parsing: a head longer than the server's limit never reaches :func:`parse_head`.
Only what the agent serves is understood: ``GET`` and ``HEAD`` without a body, HTTP/1.0 and 1.1,
keep-alive as each version defaults to it. Anything else is a :class:`BadRequest` carrying the status to
answer (400, 405, 413, 501, 505).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

MAX_HEADERS = 100
"""As http.client: more header lines than this is an abuse, not a client."""
HEAD_END = b"\r\n\r\n"
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_METHODS = ("GET", "HEAD")


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
    return bool(text) and all(c in _TOKEN for c in text)


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
