"""A fake kubelet for tests and benchmarks: serves ``GET /pods/`` (a PodList) and, when ``configz`` is set,
``GET /configz`` (the kubelet's configuration) over HTTP or HTTPS on loopback.

Behaviour switches mimic what a real kubelet does to its clients: ``mode = "ok" | "empty" | "garbage" |
"401" | "slow"`` (slow answers after ``slow_seconds``, to exercise ``--kubelet-sync-timeout``). HTTPS
uses a throw-away self-signed certificate made with the ``openssl`` tool; the bearer token is checked
when ``token`` is set, a client certificate when ``client_ca`` is. Each request's ``Authorization`` and
``User-Agent`` headers are recorded. Use as a context manager; every thread is joined on exit.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any


def make_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (``openssl`` must be installed)."""
    cert, key = directory / "kubelet.crt", directory / "kubelet.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=fake-kubelet",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class FakeKubelet:
    def __init__(
        self, *, tls_dir: Path | None = None, token: str = "", client_ca: Path | None = None
    ) -> None:
        """``tls_dir``: serve HTTPS with a certificate made there; ``token``: the bearer token required
        of ``/pods``; ``client_ca``: require a client certificate signed by it (HTTPS only)."""
        self.pods: list[Mapping[str, Any]] = []
        self.configz: Mapping[str, Any] | None = None
        """The ``/configz`` answer (``{"kubeletconfig": {...}}``); ``None``: 404."""
        self.mode = "ok"
        self.slow_seconds = 5.0
        self.token = token
        self.requests = 0
        self.auth_headers: list[str] = []
        self.user_agents: list[str] = []
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.cert: Path | None = None
        kubelet = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                with kubelet._lock:
                    kubelet.requests += 1
                    kubelet.auth_headers.append(self.headers.get("Authorization", ""))
                    kubelet.user_agents.append(self.headers.get("User-Agent", ""))
                    mode, pods, configz = kubelet.mode, list(kubelet.pods), kubelet.configz
                if self.path.rstrip("/") == "/configz" and configz is not None and mode == "ok":
                    self._send(200, json.dumps(configz).encode())
                    return
                if self.path.rstrip("/") != "/pods":
                    self._send(404, b"not found")
                    return
                if kubelet.token and self.headers.get("Authorization") != f"Bearer {kubelet.token}":
                    self._send(401, b"Unauthorized")
                    return
                if mode == "401":
                    self._send(401, b"Unauthorized")
                elif mode == "garbage":
                    self._send(200, b'{"kind": "PodList", "items": [')
                elif mode == "slow":
                    kubelet._release.wait(kubelet.slow_seconds)
                    self._send(200, b'{"kind":"PodList","items":[]}')
                else:
                    # The kubelet is a Go server: no pods is a nil slice, encoded as null.
                    items = None if mode == "empty" or not pods else pods
                    body: dict[str, Any] = {
                        "kind": "PodList",
                        "apiVersion": "v1",
                        "metadata": {},
                        "items": items,
                    }
                    self._send(200, json.dumps(body).encode())

            def _send(self, code: int, body: bytes) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if tls_dir is not None:
            cert, key = make_cert(tls_dir)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            if client_ca is not None:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(cafile=str(client_ca))
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
            self.cert = cert
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def set_pods(self, pods: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self.pods = list(pods)

    def start(self) -> FakeKubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> FakeKubelet:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def pod_object(
    uid: str,
    name: str,
    *,
    namespace: str = "default",
    node: str = "node-1",
    qos_class: str = "BestEffort",
    container_id: str = "",
    labels: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod JSON object as the kubelet serves it."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    status: dict[str, Any] = {"phase": "Running", "qosClass": qos_class}
    if container_id:
        status["containerStatuses"] = [
            {"name": "main", "containerID": container_id, "state": {"running": {}}}
        ]
    return {
        "metadata": {"uid": uid, "name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
        "status": status,
    }
