"""Who may reach the agent's endpoints: TLS, and bearer tokens checked the Kubernetes way, cached briefly.

As the kubelet and kube-rbac-proxy do: the caller's ``Authorization: Bearer <token>`` is sent to the API
server in a TokenReview (who is this?), then the user in a SubjectAccessReview with non-resource
attributes ``{path, verb}`` (may they ``get /metrics``?), so access is granted with ordinary RBAC
(``nonResourceURLs: [/metrics]``). A missing or unknown token is a 401, a known caller without the grant a
403, an API server that cannot answer a 503 (never a silent allow). Answers are cached with kubelet's
defaults (authentication 2 min, allowed 5 min, denied 30 s), keyed by the token's SHA-256, never the token
itself, and the caches are bounded so a flood of made-up tokens cannot grow them.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from koordshared.runtime.errors import APIUnavailable, ConfigError
from koordshared.runtime.flags import Flag, OptionValue

log = logging.getLogger(__name__)

ALWAYS_ALLOW = "AlwaysAllow"
WEBHOOK = "Webhook"

AUTH_FLAGS: tuple[Flag[OptionValue], ...] = (
    Flag("tls-cert-file", str, "", "serve HTTPS with this PEM certificate (and its chain)"),
    Flag("tls-private-key-file", str, "", "the private key of --tls-cert-file"),
    Flag(
        "authentication-token-webhook",
        bool,
        False,
        "authenticate callers' bearer tokens with TokenReview; /healthz and /readyz stay open",
    ),
    Flag(
        "authorization-mode",
        str,
        ALWAYS_ALLOW,
        "AlwaysAllow, or Webhook: SubjectAccessReview of the caller for the path and verb",
    ),
    Flag("authentication-token-webhook-cache-ttl", float, 120.0, "how long token reviews are cached"),
    Flag("authorization-webhook-cache-authorized-ttl", float, 300.0, "how long an allow is cached"),
    Flag("authorization-webhook-cache-unauthorized-ttl", float, 30.0, "how long a deny is cached"),
)
"""The serving flags, kubelet's names, shared by the agent and the cluster processes."""


@dataclass(frozen=True, slots=True)
class UserInfo:
    """The caller as a TokenReview names it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Reviewer(Protocol):
    """Asks the API server; raises :class:`~koordshared.runtime.errors.APIUnavailable` when it cannot
    answer."""

    def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to, or None when the API server does not know it."""
        ...

    def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        ...


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """``--authentication-token-webhook``, ``--authorization-mode`` and their cache lifetimes."""

    authenticate: bool = False
    authorize: bool = False
    authn_ttl: float = 120.0
    allowed_ttl: float = 300.0
    denied_ttl: float = 30.0
    cache_entries: int = 4096

    @property
    def enabled(self) -> bool:
        return self.authenticate or self.authorize


@dataclass(frozen=True, slots=True)
class TLSConfig:
    cert_file: str
    key_file: str
    client_ca_file: str = ""


def ssl_context(tls: TLSConfig) -> ssl.SSLContext:
    """A server context (TLS 1.2 or later); client certificates required when a client CA is given.
    :class:`ConfigError` naming the flag when a file is missing or wrong."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(f"--tls-cert-file/--tls-private-key-file: cannot load the key pair: {err}") from err
    if tls.client_ca_file:
        try:
            ctx.load_verify_locations(tls.client_ca_file)
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(f"--client-ca-file {tls.client_ca_file}: cannot load: {err}") from err
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


@dataclass(frozen=True, slots=True)
class Serving:
    """How an HTTP endpoint is served: TLS (or plain) and who may call it."""

    tls: TLSConfig | None = None
    auth: AuthConfig = AuthConfig()


def serving_from_options(options: Mapping[str, object]) -> Serving:
    """The :data:`AUTH_FLAGS` values (by flag name) as a :class:`Serving`; :class:`ConfigError` names
    the flag at fault."""
    cert, key = str(options.get("tls-cert-file") or ""), str(options.get("tls-private-key-file") or "")
    if bool(cert) != bool(key):
        raise ConfigError("--tls-cert-file and --tls-private-key-file go together")
    mode = str(options.get("authorization-mode") or ALWAYS_ALLOW)
    if mode not in (ALWAYS_ALLOW, WEBHOOK):
        raise ConfigError(f"--authorization-mode {mode!r}: want {ALWAYS_ALLOW} or {WEBHOOK}")
    authenticate = bool(options.get("authentication-token-webhook"))
    if mode == WEBHOOK and not authenticate:
        raise ConfigError(
            "--authorization-mode=Webhook needs --authentication-token-webhook: "
            "a caller must be known before access can be reviewed"
        )
    ttls = {}
    for name in (
        "authentication-token-webhook-cache-ttl",
        "authorization-webhook-cache-authorized-ttl",
        "authorization-webhook-cache-unauthorized-ttl",
    ):
        value = options.get(name, 0.0)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"--{name} {value!r}: want a duration (0 disables the cache)")
        ttls[name] = float(value)
    return Serving(
        tls=TLSConfig(cert, key) if cert else None,
        auth=AuthConfig(
            authenticate=authenticate,
            authorize=mode == WEBHOOK,
            authn_ttl=ttls["authentication-token-webhook-cache-ttl"],
            allowed_ttl=ttls["authorization-webhook-cache-authorized-ttl"],
            denied_ttl=ttls["authorization-webhook-cache-unauthorized-ttl"],
        ),
    )


K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """A bounded map whose entries expire; the least recently stored go first when full."""

    def __init__(self, entries: int, clock: Callable[[], float]) -> None:
        self._entries = entries
        self._clock = clock
        self._data: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> tuple[bool, V | None]:
        with self._lock:
            found = self._data.get(key)
            if found is None:
                return False, None
            if found[0] <= self._clock():
                del self._data[key]
                return False, None
            return True, found[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._data[key] = (self._clock() + ttl, value)
            self._data.move_to_end(key)
            while len(self._data) > self._entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


@dataclass(frozen=True, slots=True)
class Denied:
    """Why a request is refused: 401 (who are you?), 403 (not you), 503 (cannot tell now)."""

    status: int
    message: str


class DelegatingAuth:
    """Decides each request from its ``Authorization`` header; the HTTP server calls :meth:`check`."""

    def __init__(
        self, config: AuthConfig, reviewer: Reviewer, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self._reviewer = reviewer
        self._users: TTLCache[bytes, UserInfo | None] = TTLCache(config.cache_entries, clock)
        self._decisions: TTLCache[tuple[object, ...], bool] = TTLCache(config.cache_entries, clock)
        self.reviews = 0
        """TokenReviews and SubjectAccessReviews sent (cache misses), for tests and debugging."""

    def check(self, method: str, path: str, authorization: str) -> Denied | None:
        """None when the caller may ``method`` ``path``; else why not."""
        if not self.config.enabled:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Denied(401, "Unauthorized: send a bearer token (a ServiceAccount's) in Authorization")
        try:
            user = self._user(token)
            if user is None:
                return Denied(401, "Unauthorized: the token is not valid")
            if self.config.authorize and not self._allowed(user, method, path):
                verb = "get" if method in ("GET", "HEAD") else method.lower()
                return Denied(403, f"Forbidden: user {user.name!r} may not {verb} {path}")
        except APIUnavailable as err:
            log.warning("http: cannot review a caller of %s: %s", path, err)
            return Denied(503, "the API server cannot review the caller now; retry later")
        return None

    def _user(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode()).digest()
        hit, user = self._users.get(key)
        if hit:
            return user
        self.reviews += 1
        user = self._reviewer.authenticate(token)
        # An unknown token is remembered as long as a denial, a known one as long as kubelet's cache.
        self._users.put(key, user, self.config.authn_ttl if user else self.config.denied_ttl)
        return user

    def _allowed(self, user: UserInfo, method: str, path: str) -> bool:
        verb = "get" if method in ("GET", "HEAD") else method.lower()
        key = (user.name, user.uid, user.groups, tuple(sorted(user.extra.items())), verb, path)
        hit, allowed = self._decisions.get(key)
        if hit:
            return bool(allowed)
        self.reviews += 1
        allowed = self._reviewer.authorize(user, verb, path)
        self._decisions.put(key, allowed, self.config.allowed_ttl if allowed else self.config.denied_ttl)
        return allowed
