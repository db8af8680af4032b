"""koord-manager's webhook server (Koordinator's ``webhook/server.go`` and ``util/controller``): HTTPS on
``WEBHOOK_PORT`` with the certificates of the Secret ``koordinator-webhook-certs`` (made when missing,
renewed when expiring), whose CA it patches as ``caBundle`` into its webhook configurations every minute,
setting their Service's namespace and name, or, with ``WEBHOOK_HOST``, a URL to that host. Koordinator's
environment variables name everything (``POD_NAMESPACE``, ``SECRET_NAME``, ``SERVICE_NAME``,
``MUTATING_WEBHOOK_NAME``, ``VALIDATING_WEBHOOK_NAME``). Every replica serves.

A handler that fails (the API unreachable) answers HTTP 500, so kube-apiserver applies the configuration's
``failurePolicy`` (Koordinator answers a denial, which ``Ignore`` does not override).
"""

from __future__ import annotations

import base64
import http.server
import json
import logging
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koord.manager.webhook import admission, certs, configmapvalidating, podvalidating, quotavalidating
from koord.manager.webhook import colocationprofile as ccp
from koordshared.kube.client import ApiError, listed_items, request

log = logging.getLogger(__name__)
Obj = Mapping[str, Any]
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PROFILES = "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles"
QUOTAS = "/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas"
RESYNC = 60.0


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    port: int
    namespace: str = "koordinator-system"
    host: str = ""
    secret: str = "koordinator-webhook-certs"
    service: str = "koordinator-webhook-service"
    mutating: str = "koordinator-mutating-webhook-configuration"
    validating: str = "koordinator-validating-webhook-configuration"
    config_namespace: str = "koordinator-system"
    slo_config_name: str = "slo-controller-config"

    @property
    def dns_name(self) -> str:
        return self.host or certs.service_name(self.namespace, self.service)


def from_environment(
    env: Mapping[str, str], config_namespace: str, slo_config_name: str
) -> WebhookConfig | None:
    """Koordinator's variables; ``None`` without ``WEBHOOK_PORT`` (the server is off)."""
    port = env.get("WEBHOOK_PORT", "")
    if not port:
        return None
    if not port.isdecimal() or not 0 <= int(port) <= 65535:
        raise ValueError(f"WEBHOOK_PORT={port!r}: want a port number")
    return WebhookConfig(
        port=int(port),
        namespace=env.get("POD_NAMESPACE") or "koordinator-system",
        host=env.get("WEBHOOK_HOST", ""),
        secret=env.get("SECRET_NAME") or "koordinator-webhook-certs",
        service=env.get("SERVICE_NAME") or "koordinator-webhook-service",
        mutating=env.get("MUTATING_WEBHOOK_NAME") or "koordinator-mutating-webhook-configuration",
        validating=env.get("VALIDATING_WEBHOOK_NAME") or "koordinator-validating-webhook-configuration",
        config_namespace=config_namespace,
        slo_config_name=slo_config_name,
    )


class Webhooks:
    """The handlers by path, reading what they need from the API server."""

    def __init__(self, api_client: Any, cfg: WebhookConfig, timeout: float) -> None:
        self.api = api_client
        self.cfg = cfg
        self.timeout = timeout
        self.paths: dict[str, Callable[[admission.Request], admission.Admission]] = {
            "/mutate-pod": self.mutate_pod,
            "/validate-pod": self.validate_pod,
            "/validate-configmap": self.validate_configmap,
            "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota": self.validate_quota,
        }

    def _get(self, what: str, path: str) -> Any:
        return request(self.api, what, "GET", path, timeout=self.timeout)

    def _namespace_labels(self, name: str) -> Mapping[str, str]:
        doc = self._get("get namespace", f"/api/v1/namespaces/{name}")
        return dict((doc.get("metadata") or {}).get("labels") or {})

    def _priority_class(self, name: str) -> Obj | None:
        try:
            doc: Obj = self._get("get priorityclass", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
        except ApiError as err:
            if err.not_found:
                return None
            raise
        return doc

    def mutate_pod(self, req: admission.Request) -> admission.Admission:
        if req.obj is None or req.operation not in ("CREATE", "UPDATE"):
            return admission.ALLOW
        pod = dict(req.obj)
        pod.setdefault("metadata", {})
        if not pod["metadata"].get("namespace"):
            pod["metadata"] = {**pod["metadata"], "namespace": req.namespace}
        try:
            if req.operation == "CREATE":
                profiles = listed_items(self._get("list clustercolocationprofiles", PROFILES))
                lookups = ccp.Lookups(self._namespace_labels, self._priority_class)
                out = ccp.mutate(pod, profiles, lookups)
            else:
                out = json.loads(json.dumps(pod))
                ccp.extended_resource_spec(out)
        except ccp.ProfileError as err:
            return admission.deny(str(err), 500)
        patch = admission.json_patch(pod, out)
        return admission.Admission(True, patch=tuple(patch))

    def validate_pod(self, req: admission.Request) -> admission.Admission:
        if req.obj is None or req.operation not in ("CREATE", "UPDATE"):
            return admission.ALLOW
        errs = podvalidating.errors(req.obj, req.old if req.operation == "UPDATE" else None)
        return admission.deny(podvalidating.message(errs)) if errs else admission.ALLOW

    def validate_configmap(self, req: admission.Request) -> admission.Admission:
        if req.obj is None or req.operation not in ("CREATE", "UPDATE"):
            return admission.ALLOW
        try:
            configmapvalidating.check(req.obj, req.old, self.cfg.config_namespace, self.cfg.slo_config_name)
        except configmapvalidating.Refused as err:
            return admission.deny(str(err), 400)
        return admission.ALLOW

    def validate_quota(self, req: admission.Request) -> admission.Admission:
        stored = listed_items(self._get("list elasticquotas", QUOTAS))
        try:
            quotavalidating.check(req.operation, req.obj, req.old, stored)
        except quotavalidating.Refused as err:
            return admission.deny(str(err), 400)
        return admission.ALLOW

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        """The HTTP status and body for a POST of ``body`` to ``path``."""
        handler = self.paths.get(path)
        if handler is None:
            return 404, b"no webhook at this path\n"
        try:
            req = admission.parse(body)
        except admission.BadReview as err:
            return 400, f"{err}\n".encode()
        try:
            decided = handler(req)
        except Exception as err:  # the configuration's failurePolicy decides, not a denial
            log.warning("webhook %s failed for %s %s/%s: %s", path, req.kind, req.namespace, req.name, err)
            return 500, f"webhook failed: {err}\n".encode()
        return 200, admission.response(req, decided)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _TLSServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > 8 << 20:
            self.send_error(413)
            return
        body = self.rfile.read(length)
        status, out = self.server.webhooks.answer(self.path.split("?", 1)[0], body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s", format % args)


class _TLSServer(http.server.ThreadingHTTPServer):
    """Each connection wrapped with the current TLS context (swapped when the certificates change); the
    port shared by the replicas a host runs (``SO_REUSEPORT``)."""

    daemon_threads = True

    def __init__(self, port: int, webhooks: Webhooks) -> None:
        self.webhooks = webhooks
        self.context: ssl.SSLContext | None = None
        super().__init__(("", port), _Handler, bind_and_activate=False)

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = self.socket.accept()
        context = self.context
        if context is None:
            sock.close()
            raise OSError("no certificate yet")
        sock.settimeout(30)
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=True), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("webhook connection from %s failed", client_address, exc_info=True)


class WebhookServer:
    """The Component: certificates first (the Secret), then the configurations, then serving."""

    name = "webhook"

    def __init__(self, api_client: Any, cfg: WebhookConfig, timeout: float) -> None:
        self.cfg = cfg
        self.api = api_client
        self.timeout = timeout
        self.webhooks = Webhooks(api_client, cfg, timeout)
        self._server = _TLSServer(cfg.port, self.webhooks)
        self._dir = Path(tempfile.mkdtemp(prefix="koord-webhook-"))
        self._certs: certs.Certs | None = None
        self._ready = threading.Event()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def _secret_path(self, name: str = "") -> str:
        base = f"/api/v1/namespaces/{self.cfg.namespace}/secrets"
        return f"{base}/{name}" if name else base

    def ensure_certs(self) -> certs.Certs:
        """The Secret's certificates, made or renewed there first when they do not serve our name."""
        for _ in range(3):
            try:
                secret = request(
                    self.api, "get secret", "GET", self._secret_path(self.cfg.secret), timeout=self.timeout
                )
            except ApiError as err:
                if not err.not_found:
                    raise
                secret = None
            have = certs.from_secret((secret or {}).get("data"))
            want = certs.covering(have, self.cfg.dns_name) if have else certs.generate([self.cfg.dns_name])
            if want is have:
                return want
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": self.cfg.secret, "namespace": self.cfg.namespace},
                "data": certs.secret_data(want),
            }
            try:
                if secret is None:
                    request(
                        self.api,
                        "create secret",
                        "POST",
                        self._secret_path(),
                        body=body,
                        timeout=self.timeout,
                    )
                else:
                    body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
                    for key in ("labels", "annotations"):
                        if secret["metadata"].get(key):
                            body["metadata"][key] = secret["metadata"][key]
                    request(
                        self.api,
                        "update secret",
                        "PUT",
                        self._secret_path(self.cfg.secret),
                        body=body,
                        timeout=self.timeout,
                    )
                log.info("webhook certificates written to Secret %s/%s", self.cfg.namespace, self.cfg.secret)
                return want
            except ApiError as err:
                if err.status not in (409,):  # another replica wrote first: read theirs
                    raise
        raise RuntimeError(f"Secret {self.cfg.namespace}/{self.cfg.secret}: kept changing under us")

    def _load(self, c: certs.Certs) -> None:
        cert, key = self._dir / "tls.crt", self._dir / "tls.key"
        key.touch(mode=0o600)
        key.write_bytes(c.key)
        cert.write_bytes(c.cert)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        self._server.context = context
        self._certs = c

    def _client_config(self, hook: dict[str, Any], ca: str) -> bool:
        """``configuration.Ensure`` for one webhook; whether it changed."""
        cc = dict(hook.get("clientConfig") or {})
        before = dict(cc)
        path = (cc.get("service") or {}).get("path") if cc.get("service") else None
        if path is None and cc.get("url"):
            path = (
                "/" + str(cc["url"]).split("://", 1)[-1].split("/", 1)[-1]
                if "/" in str(cc["url"]).split("://", 1)[-1]
                else "/"
            )
        if path not in self.webhooks.paths:
            log.warning("ignoring webhook %s: no handler for path %s", hook.get("name"), path)
            return False
        cc["caBundle"] = ca
        if cc.get("service"):
            cc["service"] = {**cc["service"], "namespace": self.cfg.namespace, "name": self.cfg.service}
            if self.cfg.host:
                cc["url"] = f"https://{self.cfg.host}:{self.cfg.port}{path}"
                del cc["service"]
        hook["clientConfig"] = cc
        return cc != before

    def ensure_configurations(self) -> None:
        ca = base64.b64encode(self._certs.ca_cert if self._certs else b"").decode()
        for kind, name in (
            ("mutatingwebhookconfigurations", self.cfg.mutating),
            ("validatingwebhookconfigurations", self.cfg.validating),
        ):
            path = f"{ADMISSION}/{kind}/{name}"
            try:
                conf = request(self.api, f"get {kind}", "GET", path, timeout=self.timeout)
            except ApiError as err:
                if err.not_found:
                    log.warning("%s %s not found: nothing to patch", kind, name)
                    continue
                raise
            hooks = [dict(h) for h in conf.get("webhooks") or []]
            changed = [self._client_config(h, ca) for h in hooks]
            if any(changed):
                conf = {**conf, "webhooks": hooks}
                request(self.api, f"update {kind}", "PUT", path, body=conf, timeout=self.timeout)
                log.info("caBundle patched into %s %s", kind, name)

    def sync(self) -> None:
        c = self.ensure_certs()
        if c != self._certs:
            self._load(c)
        self.ensure_configurations()
        self._ready.set()

    # ---- Component ---------------------------------------------------------------------------------

    def start(self, stop: threading.Event, supervisor: Any) -> None:
        self._server.server_bind()
        self._server.server_activate()
        supervisor.go("webhook-server", self._server.serve_forever)

        def loop() -> None:
            while not stop.is_set():
                try:
                    self.sync()
                    wait = RESYNC
                except Exception as err:
                    log.warning("webhook certificates or configurations: %s; retrying", err)
                    wait = 2.0
                stop.wait(wait)

        supervisor.go("webhook-controller", loop)
        log.info("webhook server on port %d for %s", self.port, self.cfg.dns_name)

    def has_synced(self) -> bool:
        return self._ready.is_set()

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for f in self._dir.iterdir():
            f.unlink()
        self._dir.rmdir()
