"""The test API server object: lifecycle on 127.0.0.1:<free port> (plain HTTP, or HTTPS with ``tls=True``,
see :mod:`tests.apiserver.tls`), fault switches and the request log.

``down()`` closes the listening socket and every open connection (clients then get "connection
refused", the closest thing to an unreachable server); ``down("503")`` keeps listening but answers 503.
``up()`` reopens the same port. ``fail_next(n, code)`` makes the next ``n`` matching requests fail with a
proper Status; ``evictions_answer_429(True)`` blocks evictions like a PodDisruptionBudget would.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tests import crdschema
from tests.apiserver import manifests
from tests.apiserver.auth import Auth
from tests.apiserver.connections import THREAD_PREFIX, ConnectionServer
from tests.apiserver.disruption import DisruptionController
from tests.apiserver.kubelet import KubeletHook
from tests.apiserver.openapi import OpenAPI
from tests.apiserver.rbac import ANONYMOUS, User
from tests.apiserver.requestinfo import RequestInfo
from tests.apiserver.resources import Registry, ResourceType
from tests.apiserver.status import APIError
from tests.apiserver.store import Store
from tests.apiserver.tls import ServingCerts

if TYPE_CHECKING:
    from kubernetes.client import Configuration


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One answered request, as the request log keeps it (``body`` is the decoded JSON)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int


@dataclasses.dataclass(slots=True)
class _Injection:
    remaining: int
    code: int
    method: str | None
    path_contains: str | None
    retry_after: int | None


class APIServer:
    """A Kubernetes API server for tests; use as a context manager or ``start()``/``stop()``."""

    def __init__(
        self,
        *,
        crds: Iterable[crdschema.CRDSource] = (),
        history_limit: int = 1000,
        bookmark_interval: float = 60.0,
        default_watch_timeout: float = 1800.0,
        host: str = "127.0.0.1",
        port: int = 0,
        kubelet_auto_confirm: bool = False,
        authorization: bool = False,
        tls: bool = False,
    ) -> None:
        self.registry = Registry()
        self.openapi = OpenAPI(self.registry)
        self.store = Store(self.registry, history_limit=history_limit)
        self.disruption = DisruptionController(self.store)
        self.kubelet = KubeletHook(self.store, auto=kubelet_auto_confirm)
        self.auth = Auth(self.store, authorization=authorization)
        bootstrap(self.store)
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self.evictions_blocked = False
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._logged = threading.Condition(self._lock)
        self._injections: list[_Injection] = []
        self._unavailable = False
        self._streams = 0
        self._streams_done = threading.Condition(self._lock)
        self._internal_errors: list[str] = []
        self._httpd: ConnectionServer | None = None
        self._switch_lock = threading.RLock()
        self._timer: tuple[threading.Timer, object] | None = None
        self._thread: threading.Thread | None = None
        self._tls = tls
        self._certs: ServingCerts | None = None
        for crd in crds:
            self.register_crd(crd)

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> APIServer:
        if self._httpd is None:
            self._listen()
        return self

    def stop(self) -> None:
        """Shut down: end watches, cut connections, join every thread (raises if one will not end)."""
        with self._switch_lock:
            old = self._take_timer()
            self._unavailable = False
            try:
                self._close()
            finally:
                if self._certs is not None:
                    self._certs.remove()
                    self._certs = None
        _join(old)

    def __enter__(self) -> APIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _listen(self) -> None:
        self.store.open_watches()
        if self._tls and self._certs is None:
            self._certs = ServingCerts()
        httpd = ConnectionServer((self._host, self._port), self, self._certs.context if self._certs else None)
        self._port = httpd.server_address[1]
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"{THREAD_PREFIX}-{self._port}"
        )
        thread.start()
        self._httpd, self._thread = httpd, thread

    def _close(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._httpd = self._thread = None
        httpd.shutdown()
        self.store.close_watchers()
        # Let open watch streams write their final chunk, so clients see a clean end, not a cut.
        with self._lock:
            self._streams_done.wait_for(lambda: self._streams == 0, timeout=2.0)
        stuck = httpd.close_connections(timeout=5.0)
        httpd.server_close()
        thread.join(5.0)
        if stuck or thread.is_alive():
            raise RuntimeError(f"test API server threads did not end: {[t.name for t in stuck]}")

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self._host}:{self._port}"

    @property
    def ca_file(self) -> Path | None:
        """The CA of the serving certificate (TLS only, once started)."""
        return self._certs.ca_file if self._certs is not None else None

    def kubeconfig(self, token: str | None = None) -> dict[str, Any]:
        """A kubeconfig for this server, authenticating with ``token`` (default: the admin's); with TLS
        it carries the CA as ``certificate-authority-data``."""
        cluster: dict[str, Any] = {"server": self.url}
        if self._certs is not None:
            cluster["certificate-authority-data"] = self._certs.ca_data()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": cluster}],
            "users": [{"name": "user", "user": {"token": token or self.auth.admin_token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
            "current-context": "test",
        }

    def client_config(self, service_account: str | None = None, *, token: str | None = None) -> Configuration:
        """A ``kubernetes.client.Configuration`` for this server (no global client state is touched).

        It authenticates as the admin (``system:masters``) unless ``service_account`` (``"ns/name"``)
        or a ``token`` says otherwise; without authorization the identity changes nothing.
        """
        from kubernetes import client

        if service_account is not None:
            ns, _, name = service_account.partition("/")
            token = self.auth.token_for(ns, name)
        config = client.Configuration(host=self.url)
        config.api_key = {"authorization": f"Bearer {token or self.auth.admin_token}"}
        if self.ca_file is not None:
            config.ssl_ca_cert = str(self.ca_file)
        return config

    def token_for(self, namespace: str, name: str) -> str:
        """A bearer token for the ServiceAccount ``namespace/name`` (which must exist when it is used)."""
        return self.auth.token_for(namespace, name)

    def apply(self, *sources: str | os.PathLike[str] | dict[str, Any]) -> list[str]:
        """Create the objects of manifests (YAML files or dicts) whose kinds this server serves, as
        ``kubectl apply`` of new objects would; returns ``kind/name`` of each one created. Kinds it does
        not serve (Deployments, DaemonSets...) are skipped."""
        return manifests.apply(self.store, self.registry, sources)

    def register_crd(self, crd: crdschema.CRDSource) -> list[ResourceType]:
        """Serve the CRD's resources and validate their objects against its schema (the CRD object is
        stored too, so ``kubectl get crd`` lists it)."""
        doc = crdschema.load_crd(crd)
        self.store.create("customresourcedefinitions", doc)
        name = doc["metadata"]["name"]
        return [rt for rt in self.registry.all() if rt.crd is not None and rt.crd["metadata"]["name"] == name]

    # ---- fault switches -------------------------------------------------------------------------------

    def down(self, mode: str = "refuse", *, for_seconds: float | None = None) -> None:
        """Make the server unreachable: ``"refuse"`` closes the port, ``"503"`` answers ServiceUnavailable.

        With ``for_seconds`` it comes back up by itself after that long (an outage during a test).
        """
        if mode not in ("refuse", "503"):
            raise ValueError(f"unknown down mode {mode!r}")
        with self._switch_lock:
            old = self._take_timer()
            if mode == "503":
                self._unavailable = True
                self.store.close_watchers()
            else:
                self._close()
            if for_seconds is not None:
                token = object()
                timer = threading.Timer(for_seconds, self._timed_up, args=(token,))
                timer.name = f"{THREAD_PREFIX}-outage"
                self._timer = (timer, token)
                timer.start()
        _join(old)

    def up(self) -> None:
        """Serve again on the same port."""
        with self._switch_lock:
            old = self._take_timer()
            self._up()
        _join(old)

    def _up(self) -> None:
        self._unavailable = False
        self.store.open_watches()
        if self._httpd is None:
            self._listen()

    def _timed_up(self, token: object) -> None:
        with self._switch_lock:
            # A later up()/down()/stop() replaced this outage: leave the server as they set it.
            if self._timer is None or self._timer[1] is not token:
                return
            self._timer = None
            self._up()

    def _take_timer(self) -> threading.Timer | None:
        """Cancel the pending outage end (call with the switch lock held; join the result after)."""
        pending, self._timer = self._timer, None
        if pending is None:
            return None
        pending[0].cancel()
        return pending[0]

    @property
    def is_down(self) -> bool:
        return self._unavailable or self._httpd is None

    def evictions_answer_429(self, blocked: bool = True) -> None:
        """While set, evictions answer 429 TooManyRequests, as when a PodDisruptionBudget blocks them."""
        self.evictions_blocked = blocked

    def authenticate(self, header: str | None) -> User:
        """The user a request's ``Authorization`` header names (401 for an unknown token)."""
        if not self.auth.authorization and header and self.auth.user_of(header.partition(" ")[2]) is None:
            return ANONYMOUS  # without authorization, any token (or none) is let through as before
        return self.auth.authenticate(header)

    def authorize(self, user: User, info: RequestInfo) -> None:
        """403 when authorization is on and RBAC does not allow ``user`` to do ``info``."""
        self.auth.authorize(user, info)

    def fail_next(
        self,
        n: int,
        status: int,
        *,
        method: str | None = None,
        path_contains: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """The next ``n`` requests (matching ``method``/``path_contains`` if given) answer ``status``.

        ``retry_after`` adds a Retry-After header; note urllib3 then retries idempotent requests on
        429/503 by itself, as it would against a real server.
        """
        with self._lock:
            self._injections.append(_Injection(n, status, method, path_contains, retry_after))

    def check_injected(self, method: str, path: str) -> None:
        """Raise the APIError an active switch calls for (used by the request handler)."""
        if self._unavailable:
            raise APIError(503, "the test API server is down", reason="ServiceUnavailable")
        with self._lock:
            for inj in self._injections:
                if inj.remaining <= 0:
                    continue
                if inj.method is not None and inj.method != method:
                    continue
                if inj.path_contains is not None and inj.path_contains not in path:
                    continue
                inj.remaining -= 1
                headers = {"Retry-After": str(inj.retry_after)} if inj.retry_after is not None else None
                raise APIError(inj.code, f"injected failure ({inj.code})", headers=headers)

    def stream_started(self) -> None:
        with self._lock:
            self._streams += 1

    def stream_ended(self) -> None:
        with self._lock:
            self._streams -= 1
            self._streams_done.notify_all()

    def note_internal_error(self, method: str, path: str, err: BaseException) -> None:
        """A request raised something the server did not expect (answered 500): a bug to look at."""
        with self._lock:
            self._internal_errors.append(f"{method} {path}: {err!r}")

    @property
    def internal_errors(self) -> list[str]:
        """``"<method> <path>: <exception>"`` of every request that hit a bug of the server (a copy)."""
        with self._lock:
            return list(self._internal_errors)

    # ---- request log ----------------------------------------------------------------------------------

    def record(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: Any, code: int
    ) -> None:
        with self._lock:
            self._requests.append(Request(method, path, query, headers, body, code))
            self._logged.notify_all()

    def wait_for_requests(
        self, match: Callable[[Request], bool], count: int = 1, timeout: float = 5.0
    ) -> list[Request]:
        """Block until ``count`` logged requests satisfy ``match`` (or ``timeout``); returns those seen.

        A test's way to wait for the code under test to reach the server, e.g. a status PATCH.
        """
        with self._lock:
            self._logged.wait_for(lambda: sum(map(match, self._requests)) >= count, timeout)
            return [r for r in self._requests if match(r)]

    @property
    def requests(self) -> list[Request]:
        """Answered requests so far, oldest first (a copy; watches are logged when they end)."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()


def _join(timer: threading.Timer | None) -> None:
    # Outside the switch lock: a timer that already fired may be waiting for it.
    if timer is not None and timer is not threading.current_thread():
        timer.join(5.0)


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000))


def bootstrap(store: Store) -> None:
    """What a new cluster has before anyone writes: the system namespaces and priority classes."""
    for ns in SYSTEM_NAMESPACES:
        store.create("namespaces", {"metadata": {"name": ns}}, keep_status=False)
    for name, value in SYSTEM_PRIORITY_CLASSES:
        store.create(
            "priorityclasses.scheduling.k8s.io",
            {"metadata": {"name": name}, "value": value, "description": "built in"},
            keep_status=False,
        )
