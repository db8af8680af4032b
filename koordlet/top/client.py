"""Fetching the agent's ``/status`` document for ``koordlet top`` (and the demo).

The address is ``host:port`` (``:port`` means loopback) or a URL; ``https://`` is verified against
``--ca-file`` (or the system's CAs). A bearer token, when given, goes in ``Authorization``: an agent
serving with ``--authentication-token-webhook`` asks for it on every route but the probes. Every failure
is an :class:`AgentUnreachable` whose message names the URL it tried and what to do.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from koordlet.agentstatus import API_VERSION

DEFAULT_ADDR = "127.0.0.1:9316"
"""The agent's default ``--addr``."""


class AgentUnreachable(Exception):
    """No usable ``/status`` answer; ``gone`` when nothing listens there (connection refused)."""

    def __init__(self, message: str, *, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


def base_url(addr: str) -> str:
    """``host:port``, ``:port`` or a URL as a base URL without a trailing slash."""
    addr = addr.strip()
    if "://" in addr:
        return addr.rstrip("/")
    host, _, port = addr.rpartition(":")
    if not port.isdecimal():
        raise ValueError(f"--addr {addr!r}: give host:port, :port or a URL (http://..., https://...)")
    return f"http://{host or '127.0.0.1'}:{port}"


@dataclass(frozen=True)
class StatusClient:
    """Reads ``<base>/status``; ``token`` is a bearer token, ``ca_file`` a PEM bundle for https."""

    base: str
    token: str = ""
    ca_file: str = ""
    insecure: bool = False
    timeout: float = 3.0

    @property
    def url(self) -> str:
        return f"{self.base}/status"

    def _context(self) -> ssl.SSLContext | None:
        if not self.base.startswith("https://"):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file or None)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def get(self, window: float | None = None) -> dict[str, Any]:
        url = self.url + (f"?window={window:g}" if window is not None else "")
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._context()) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            raise AgentUnreachable(self._http_error(err.code, err.read()[:300])) from err
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            reason = getattr(err, "reason", err)
            gone = isinstance(reason, ConnectionRefusedError | ConnectionResetError | socket.gaierror)
            hint = (
                "is `koordlet run` running there? (--addr to look elsewhere)"
                if gone
                else "the agent did not answer in time or the connection failed"
            )
            if isinstance(reason, ssl.SSLError):
                hint = "TLS failed: pass --ca-file with the CA of the agent's certificate"
            raise AgentUnreachable(f"no agent answered at {self.url}: {reason}; {hint}", gone=gone) from err
        try:
            doc = json.loads(body)
        except ValueError as err:
            raise AgentUnreachable(f"{url} did not answer JSON: {body[:120]!r}") from err
        if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION:
            got = doc.get("apiVersion") if isinstance(doc, dict) else type(doc).__name__
            raise AgentUnreachable(
                f"{url} answered apiVersion {got!r}; this koordlet top reads {API_VERSION}"
            )
        return doc

    def _http_error(self, code: int, body: bytes) -> str:
        text = body.decode(errors="replace").strip()
        if code == 401:
            return f"{self.url}: 401 Unauthorized: pass a bearer token (--token or --token-file)"
        if code == 403:
            return f"{self.url}: 403 Forbidden: the token's user may not get /status ({text})"
        if code == 404:
            return f"{self.url}: 404: this agent has no /status (an older koordlet?)"
        return f"{self.url}: HTTP {code}: {text}"
