"""The kubelet's HTTP endpoint as koordlet reaches it (``impl/kubelet_stub.go``): ``/pods/`` for the pod
list and ``/configz`` for the kubelet's configuration (CPU manager and topology manager policies).

Secure by default: HTTPS on the kubelet port with the agent's credentials (:class:`KubeletCredentials`:
a bearer token, its file re-read on every request as tokens rotate, and/or a client certificate), the
serving certificate verified against a CA when one is configured (else not, as koordlet);
``--kubelet-insecure-tls`` is plain HTTP on the read-only port without credentials. Every failure is
:class:`APIUnavailable`.
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

from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KubeletCredentials:
    """Who the agent is to the kubelet (whose webhook authentication asks the API server about it)."""

    token_file: str = ""
    """A bearer token's file, re-read on every request (tokens rotate); wins over ``authorization``."""
    authorization: Callable[[], str | None] | None = None
    """The ``Authorization`` header value of the agent's API client, asked on every request (the client
    refreshes an exec plugin's or an expiring token itself)."""
    cert_file: str = ""
    key_file: str = ""
    """A client certificate and its key (a kubeconfig's ``client-certificate``/``client-key``)."""

    def header(self) -> str:
        """The ``Authorization`` header to send (empty: none)."""
        if self.token_file:
            try:
                token = Path(self.token_file).read_text().strip()
            except OSError as err:
                raise APIUnavailable(f"kubelet: cannot read token {self.token_file}: {err}") from err
            return f"Bearer {token}" if token else ""
        return (self.authorization() or "") if self.authorization is not None else ""


@dataclass(frozen=True, slots=True)
class KubeletEndpoint:
    """Where and how to reach the kubelet."""

    address: str = "127.0.0.1"
    port: int = 10250
    insecure: bool = False
    """``--kubelet-insecure-tls``: plain HTTP on the read-only port, no token (tests and dev only)."""
    read_only_port: int = 10255
    credentials: KubeletCredentials = KubeletCredentials()
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


def _version(path: str) -> str:
    """``path`` with its modification time (empty for no file)."""
    if not path:
        return ""
    try:
        return f"{path}@{Path(path).stat().st_mtime_ns}"
    except OSError:
        return path


class KubeletClient:
    """GETs JSON documents from the kubelet of :class:`KubeletEndpoint` (asked for on every call),
    sending ``user_agent`` as the agent's own name."""

    def __init__(self, endpoint: Callable[[], KubeletEndpoint], *, user_agent: str = "") -> None:
        self._endpoint = endpoint
        self._user_agent = user_agent
        self._warned_unverified = False
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _context(self, ep: KubeletEndpoint) -> ssl.SSLContext | None:
        if ep.insecure:
            return None
        # Building a context loads the CA bundle and the client certificate (milliseconds): keep one per
        # version of those files, so a rotated CA or certificate is picked up without paying the load on
        # every refresh.
        creds = ep.credentials
        key = "|".join(_version(f) for f in (ep.ca_file, creds.cert_file, creds.key_file))
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
        else:
            if not self._warned_unverified:
                log.warning("kubelet: no CA configured, the serving certificate is not verified")
                self._warned_unverified = True
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        creds = ep.credentials
        if creds.cert_file:
            try:
                ctx.load_cert_chain(creds.cert_file, creds.key_file or None)
            except (OSError, ssl.SSLError) as err:
                raise APIUnavailable(f"kubelet: client certificate {creds.cert_file}: {err}") from err
        return ctx

    def get_json(self, path: str) -> tuple[str, Any]:
        """``(url, decoded body)`` of ``GET path``."""
        ep = self._endpoint()
        url = ep.url_of(path)
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._user_agent:
            req.add_header("User-Agent", self._user_agent)
        if not ep.insecure:
            header = ep.credentials.header()
            if header:
                req.add_header("Authorization", header)
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
