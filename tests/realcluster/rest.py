"""A small JSON client for kube-apiserver over mutual TLS, for making many objects quickly (hollow nodes,
their NodeMetrics and Leases, benchmark pods): one kept-alive connection per thread, no models, no
retries beyond a reconnect. kubectl is a process per call (tens of milliseconds); this is a request.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")


class APIError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(f"{method} {path}: {status} {body[:300].decode(errors='replace')}")
        self.status = status


class Rest:
    """Requests to ``server`` as the holder of ``cert``/``key`` (the admin's, by default)."""

    def __init__(
        self, server: str, ca: Path, cert: Path, key: Path, *, user_agent: str = "koordlet-bench"
    ) -> None:
        url = urlsplit(server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.ctx.load_cert_chain(str(cert), str(key))
        self.user_agent = user_agent
        self._local = threading.local()

    @classmethod
    def admin(cls, pki: Path, server: str, *, user_agent: str = "koordlet-bench") -> Rest:
        return cls(server, pki / "ca.crt", pki / "admin.crt", pki / "admin.key", user_agent=user_agent)

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            self._local.conn = conn
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        ok: Iterable[int] = (200, 201),
    ) -> Any:
        """The decoded answer; :class:`APIError` on a status not in ``ok``."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.HTTPException, ConnectionError, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if resp.status not in ok:
            raise APIError(method, path, resp.status, raw)
        return json.loads(raw) if raw else None

    def create(self, path: str, obj: Mapping[str, Any], *, exist_ok: bool = False) -> Any:
        return self.request("POST", path, obj, ok=(200, 201, 409) if exist_ok else (200, 201))

    def patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def parallel(fn: Callable[[T], object], items: Iterable[T], threads: int = 8) -> None:
    """``fn`` over ``items`` from ``threads`` threads; the first failure is raised."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in pool.map(fn, items):
            pass
