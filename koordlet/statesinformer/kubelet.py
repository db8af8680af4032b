"""The kubelet's HTTP endpoint as koordlet reaches it (``impl/kubelet_stub.go``): ``/pods/`` for the pod
list and ``/configz`` for the kubelet's configuration (CPU manager and topology manager policies).

Secure by default: HTTPS on the kubelet port with the service-account bearer token (re-read on every
request, tokens rotate), the serving certificate verified against a CA when one is configured (else not,
as koordlet); ``--kubelet-insecure-tls`` is plain HTTP on the read-only port without a token. Every failure
is :class:`APIUnavailable`.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koord.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KubeletEndpoint:
    """Where and how to reach the kubelet."""

    address: str = "127.0.0.1"
    port: int = 10250
    insecure: bool = False
    """``--kubelet-insecure-tls``: plain HTTP on the read-only port, no token (tests and dev only)."""
    read_only_port: int = 10255
    token_file: str = ""
    """Service-account bearer token, re-read on every request (tokens rotate)."""
    ca_file: str = ""
    """CA for the kubelet's serving certificate; empty = do not verify (koordlet's own behaviour)."""
    timeout: float = 3.0

    def url_of(self, path: str) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        if self.insecure:
            return f"http://{host}:{self.read_only_port}{path}"
        return f"https://{host}:{self.port}{path}"

    @property
    def url(self) -> str:
        """The pod list's URL."""
        return self.url_of("/pods/")


class KubeletClient:
    """GETs JSON documents from the kubelet of :class:`KubeletEndpoint` (asked for on every call)."""

    def __init__(self, endpoint: Callable[[], KubeletEndpoint]) -> None:
        self._endpoint = endpoint
        self._warned_unverified = False
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _context(self, ep: KubeletEndpoint) -> ssl.SSLContext | None:
        if ep.insecure:
            return None
        # Building a context loads the CA bundle (milliseconds): keep one per CA file version, so a
        # rotated CA is picked up without paying the load on every refresh.
        try:
            key = f"{ep.ca_file}@{Path(ep.ca_file).stat().st_mtime_ns}" if ep.ca_file else ""
        except OSError:
            key = ep.ca_file
        ctx = self._contexts.get(key)
        if ctx is None:
            self._contexts.clear()
            ctx = self._contexts[key] = self._new_context(ep)
        return ctx

    def _new_context(self, ep: KubeletEndpoint) -> ssl.SSLContext:
        if ep.ca_file:
            ctx = ssl.create_default_context(cafile=ep.ca_file)
            # Kubelet serving certificates name the node, not the IP we dial: verify the chain only.
            ctx.check_hostname = False
            return ctx
        if not self._warned_unverified:
            log.warning("kubelet: no CA configured, the serving certificate is not verified")
            self._warned_unverified = True
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def get_json(self, path: str) -> tuple[str, Any]:
        """``(url, decoded body)`` of ``GET path``."""
        ep = self._endpoint()
        url = ep.url_of(path)
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        if not ep.insecure and ep.token_file:
            try:
                token = Path(ep.token_file).read_text().strip()
            except OSError as err:
                raise APIUnavailable(f"kubelet: cannot read token {ep.token_file}: {err}") from err
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=ep.timeout, context=self._context(ep)) as resp:
                body = resp.read(MAX_BODY_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise APIUnavailable(f"kubelet {url}: {err}") from err
        if len(body) > MAX_BODY_BYTES:
            raise APIUnavailable(f"kubelet {url}: answer larger than {MAX_BODY_BYTES} bytes")
        try:
            return url, json.loads(body)
        except ValueError as err:
            raise APIUnavailable(f"kubelet {url}: bad JSON: {err}") from err
