"""Cluster credentials without the ``kubernetes`` package: a kubeconfig file's current context or the
in-cluster service account, as an :class:`Endpoint` the lean transport connects with.

Importing the official client's ``config`` module pulls requests, requests_oauthlib and pydantic, the
largest part of a scheduler's start; this reads the cases our processes are given (a server, a CA, a
client certificate and key, a token or a token file, each as a file or inline data). What only the
official client does (exec and auth-provider plugins, basic auth, a proxy, a TLS server name) gives
``None`` from :func:`from_kubeconfig`, and the caller uses the official client.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordshared.runtime.errors import ConfigError

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REREAD = 60.0
"""Seconds a token file is trusted before it is read again (client-go's cached token source: a
projected service-account token is rotated on disk)."""
_OFFICIAL_ONLY_USER = ("exec", "auth-provider", "username", "password")
_OFFICIAL_ONLY_CLUSTER = ("proxy-url", "tls-server-name")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An API server and how to reach it: TLS material as files or PEM data, a token or a token file."""

    server: str
    ca_file: str = ""
    ca_data: bytes = b""
    cert_file: str = ""
    cert_data: bytes = b""
    key_file: str = ""
    key_data: bytes = b""
    token: str = ""
    token_file: str = ""
    insecure: bool = False

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context (CA, client certificate); :class:`ConfigError` naming a file that cannot be
        used."""
        try:
            ctx = ssl.create_default_context(
                cafile=self.ca_file or None, cadata=self.ca_data.decode() if self.ca_data else None
            )
        except (OSError, ssl.SSLError, UnicodeDecodeError) as err:
            raise ConfigError(f"certificate-authority {self.ca_file or '(data)'}: {err}") from err
        if self.cert_file or self.cert_data:
            _load_cert_chain(ctx, self)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, ep: Endpoint) -> None:
    # ssl reads a certificate and key from files only: inline data goes through a private temporary
    # directory, removed as soon as they are loaded.
    with tempfile.TemporaryDirectory(prefix="koord-tls-") as tmp:
        cert, key = ep.cert_file, ep.key_file
        if ep.cert_data:
            cert = _private_file(Path(tmp) / "tls.crt", ep.cert_data)
        if ep.key_data:
            key = _private_file(Path(tmp) / "tls.key", ep.key_data)
        try:
            ctx.load_cert_chain(cert, key or None)
        except (OSError, ssl.SSLError) as err:
            what = f"{ep.cert_file or '(data)'} / {ep.key_file or '(data)'}"
            raise ConfigError(f"client-certificate and client-key {what}: {err}") from err


def _private_file(path: Path, data: bytes) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return str(path)


def from_kubeconfig(path: str, context: str = "") -> Endpoint | None:
    """The endpoint of ``context`` (else the current context) of the kubeconfig at ``path``; ``None``
    when its user or cluster needs the official client; :class:`ConfigError` naming what is wrong."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ConfigError(f"kubeconfig {path}: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"kubeconfig {path}: not YAML: {err}") from err
    if not isinstance(doc, Mapping):
        raise ConfigError(f"kubeconfig {path}: not a kubeconfig (a mapping with clusters, contexts, users)")
    name = context or str(doc.get("current-context") or "")
    if not name:
        raise ConfigError(f"kubeconfig {path}: no current-context set and no context given")
    ctx = _named(doc, "contexts", "context", name, path)
    cluster_name = str(ctx.get("cluster") or "")
    if not cluster_name:
        raise ConfigError(f"kubeconfig {path}: context {name!r} names no cluster")
    cluster = _named(doc, "clusters", "cluster", cluster_name, path)
    user_name = str(ctx.get("user") or "")
    user = _named(doc, "users", "user", user_name, path) if user_name else {}
    if any(cluster.get(k) for k in _OFFICIAL_ONLY_CLUSTER) or any(user.get(k) for k in _OFFICIAL_ONLY_USER):
        return None
    server = str(cluster.get("server") or "")
    if not server.startswith(("https://", "http://")):
        raise ConfigError(f"kubeconfig {path}: cluster {cluster_name!r} has no http(s) server ({server!r})")
    base = Path(path).resolve().parent
    cert = _file(user, "client-certificate", base)
    key = _file(user, "client-key", base)
    cert_data = _data(user, "client-certificate-data", path)
    key_data = _data(user, "client-key-data", path)
    if bool(cert or cert_data) != bool(key or key_data):
        raise ConfigError(f"kubeconfig {path}: user {user_name!r} has a client certificate or key, not both")
    return Endpoint(
        server=server.rstrip("/"),
        ca_file=_file(cluster, "certificate-authority", base),
        ca_data=_data(cluster, "certificate-authority-data", path),
        cert_file=cert,
        cert_data=cert_data,
        key_file=key,
        key_data=key_data,
        token=str(user.get("token") or ""),
        token_file=_file(user, "tokenFile", base),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def _named(doc: Mapping[str, Any], section: str, key: str, name: str, path: str) -> Mapping[str, Any]:
    for entry in doc.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(key)
            return body if isinstance(body, Mapping) else {}
    raise ConfigError(f"kubeconfig {path}: no {key} named {name!r} in {section}")


def _file(section: Mapping[str, Any], key: str, base: Path) -> str:
    """A file the kubeconfig names, relative to the kubeconfig's directory as client-go resolves it."""
    value = str(section.get(key) or "")
    return str(base / value) if value else ""


def _data(section: Mapping[str, Any], key: str, path: str) -> bytes:
    value = section.get(key)
    if not value:
        return b""
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as err:
        raise ConfigError(f"kubeconfig {path}: {key} is not base64: {err}") from err


def in_cluster(environ: Mapping[str, str] = os.environ, root: str = SERVICE_ACCOUNT) -> Endpoint:
    """The service account of the pod this runs in (``KUBERNETES_SERVICE_HOST``/``_PORT``, the token and
    CA mounted at ``root``); :class:`ConfigError` naming what is missing."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "no kubeconfig given and not in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "are not both set)"
        )
    token, ca = Path(root) / "token", Path(root) / "ca.crt"
    for f in (token, ca):
        if not f.is_file():
            raise ConfigError(f"in-cluster configuration: {f} is missing (no service account mounted?)")
    host = f"[{host}]" if ":" in host else host
    return Endpoint(server=f"https://{host}:{port}", ca_file=str(ca), token_file=str(token))


class Token:
    """The bearer token of an endpoint: its own, or its token file's, read again every
    :data:`TOKEN_REREAD` seconds."""

    def __init__(self, ep: Endpoint, clock: Any = time.monotonic) -> None:
        self._ep = ep
        self._clock = clock
        self._lock = threading.Lock()
        self._value = ep.token
        self._read_at: float | None = None

    def __call__(self) -> str:
        if self._ep.token or not self._ep.token_file:
            return self._value
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= TOKEN_REREAD:
                try:
                    self._value = Path(self._ep.token_file).read_text().strip()
                except OSError as err:
                    if self._read_at is None:
                        raise ConfigError(f"tokenFile {self._ep.token_file}: {err.strerror or err}") from err
                    # A rotation caught mid-write: keep the last token until the next read.
                self._read_at = now
            return self._value
