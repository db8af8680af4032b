"""Who may call the agent: serving flags, the review caches (kubelet's lifetimes, bounded, keyed by the
token's hash) and the answers the server gives (401, 403, 503, open probes), over plain HTTP and TLS."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from koordlet.testing import FakeClock, wait_until
from koordshared.kube.delegation import delegating_auth
from koordshared.runtime.errors import APIUnavailable, ConfigError
from koordshared.runtime.httpaccess import (
    AuthConfig,
    DelegatingAuth,
    TLSConfig,
    TTLCache,
    UserInfo,
    serving_from_options,
    ssl_context,
)
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.support.pki import make_pki
from tests.support.rawhttp import get
from tests.unit.koordshared.runtime.conftest import Serve

ALICE, BOB = UserInfo("alice", "u-1", ("readers",)), UserInfo("bob")


class FakeReviewer:
    """Tokens ``alice`` and ``bob``; alice may get /hello only; ``down`` makes every review fail."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.down = False

    def authenticate(self, token: str) -> UserInfo | None:
        self.calls.append("token")
        if self.down:
            raise APIUnavailable("TokenReview: connection refused")
        return {"alice-token": ALICE, "bob-token": BOB}.get(token)

    def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        self.calls.append(f"access {user.name} {verb} {path}")
        return user is ALICE and verb == "get" and path == "/hello"


ON = AuthConfig(authenticate=True, authorize=True)


def test_serving_flags() -> None:
    assert not serving_from_options({}).auth.enabled
    s = serving_from_options(
        {
            "tls-cert-file": "c",
            "tls-private-key-file": "k",
            "authentication-token-webhook": True,
            "authorization-mode": "Webhook",
            "authentication-token-webhook-cache-ttl": 60.0,
        }
    )
    assert s.tls == TLSConfig("c", "k") and s.auth.authorize and s.auth.authn_ttl == 60.0
    refused: list[tuple[dict[str, object], str]] = [
        ({"tls-cert-file": "c"}, "--tls-private-key-file"),
        ({"authorization-mode": "RBAC"}, "--authorization-mode"),
        ({"authorization-mode": "Webhook"}, "--authentication-token-webhook"),
        ({"authorization-webhook-cache-authorized-ttl": -1.0}, "authorized-ttl"),
    ]
    for bad, flag in refused:
        with pytest.raises(ConfigError, match=flag):
            serving_from_options(bad)


def test_ttl_cache_expires_and_stays_bounded() -> None:
    clock = FakeClock()
    cache: TTLCache[str, int] = TTLCache(3, clock)
    cache.put("a", 1, 10)
    cache.put("zero", 0, 0)  # a zero lifetime is not cached
    assert cache.get("a") == (True, 1) and cache.get("zero") == (False, None)
    clock.advance(10)
    assert cache.get("a") == (False, None)
    for i in range(10):
        cache.put(str(i), i, 100)
    assert len(cache) == 3 and cache.get("9") == (True, 9) and cache.get("0") == (False, None)


def test_decisions_and_their_cache_lifetimes() -> None:
    clock, reviewer = FakeClock(), FakeReviewer()
    auth = DelegatingAuth(ON, reviewer, clock=clock)

    def status(token: str, path: str = "/hello") -> int:
        denied = auth.check("GET", path, f"Bearer {token}" if token else "")
        return 200 if denied is None else denied.status

    assert status("") == 401 and reviewer.calls == []
    assert auth.check("GET", "/hello", "Basic YWxpY2U6eA==") is not None
    assert status("alice-token") == 200
    assert status("bob-token") == 403
    assert status("alice-token", "/events") == 403
    assert status("made-up") == 401
    calls = len(reviewer.calls)
    assert [status("alice-token"), status("bob-token"), status("made-up")] == [200, 403, 401]
    assert len(reviewer.calls) == calls  # all cached
    clock.advance(31)  # past the denial lifetime: bob's deny and the unknown token are reviewed again
    assert [status("alice-token"), status("bob-token"), status("made-up")] == [200, 403, 401]
    assert sorted(reviewer.calls[calls:]) == ["access bob get /hello", "token"]
    clock.advance(120)  # past the authentication lifetime, inside the 5 min allow
    reviewer.calls.clear()
    assert status("alice-token") == 200 and reviewer.calls == ["token"]
    reviewer.down = True
    clock.advance(1000)
    denied = auth.check("GET", "/hello", "Bearer alice-token")
    assert denied is not None and denied.status == 503


def test_a_token_is_never_kept(caplog: pytest.LogCaptureFixture) -> None:
    reviewer = FakeReviewer()
    auth = DelegatingAuth(ON, reviewer)
    caplog.set_level(logging.DEBUG)
    auth.check("GET", "/hello", "Bearer alice-token")
    reviewer.down = True
    auth.check("GET", "/hello", "Bearer secret-token-value")
    keys = [repr(k) for k in auth._users._data]
    assert keys and not any("token" in k for k in keys)
    assert not any("secret-token-value" in r.getMessage() for r in caplog.records)


def test_the_server_answers_401_403_503_and_keeps_probes_open(serve: Serve) -> None:
    reviewer = FakeReviewer()
    server = serve(auth=DelegatingAuth(ON, reviewer))
    status, headers, _ = get(server, "/hello")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert get(server, "/hello", "Authorization: Bearer bob-token")[0] == 403
    assert get(server, "/metrics", "Authorization: Bearer alice-token")[0] == 403
    assert get(server, "/hello", "Authorization: Bearer alice-token")[::2] == (200, b"hello \n")
    assert get(server, "/nope", "Authorization: Bearer alice-token")[0] == 403  # no path probing
    reviewer.down = True
    assert get(server, "/hello", "Authorization: Bearer never-seen")[0] == 503
    reviews = len(reviewer.calls)
    assert get(server, "/healthz")[0] == 200
    assert len(reviewer.calls) == reviews


@pytest.mark.tool("openssl")
def test_tls_serving_and_a_plain_client_on_the_tls_port(
    serve: Serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pki = make_pki(tmp_path)
    server = serve(tls=ssl_context(TLSConfig(str(pki / "server.crt"), str(pki / "server.key"))))
    assert server.scheme == "https"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=5)
    try:
        for who in ("a", "b"):  # two requests on one TLS connection
            conn.request("GET", f"/hello?who={who}")
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, f"hello {who}\n".encode())
    finally:
        conn.close()
    caplog.set_level(logging.INFO, "koordshared.runtime.httpconn")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
        plain.sendall(b"GET /hello HTTP/1.1\r\n\r\n")
    assert wait_until(lambda: any("TLS handshake" in r.getMessage() for r in caplog.records), 5)
    assert not any(r.exc_info for r in caplog.records)


def test_a_missing_key_pair_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--tls-cert-file"):
        ssl_context(TLSConfig(str(tmp_path / "no.crt"), str(tmp_path / "no.key")))


def test_the_reviews_carry_the_process_user_agent(api_server: APIServer) -> None:  # noqa: F811
    auth = delegating_auth(ON, client_configuration=api_server.client_config(), user_agent="koordlet/9 (n1)")
    assert auth.check("GET", "/metrics", "Bearer not-a-token") is not None  # refused, after a TokenReview
    reviews = [r for r in api_server.requests if r.path.endswith("/tokenreviews")]
    assert reviews and {{k.lower(): v for k, v in r.headers.items()}["user-agent"] for r in reviews} == {
        "koordlet/9 (n1)"
    }


REVIEW_PROBE = """
import sys
from koordshared.kube.delegation import delegating_auth
from koordshared.runtime.httpaccess import AuthConfig

auth = delegating_auth(AuthConfig(authenticate=True, authorize=True), sys.argv[1], user_agent="koordlet/9")
assert auth.check("GET", "/metrics", "Bearer not-a-token") is not None  # refused, after a TokenReview
print(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes"))
"""


def test_a_kubeconfig_reviews_through_the_lean_client(api_server: APIServer, tmp_path: Path) -> None:  # noqa: F811
    # The DaemonSet reviews its scrapers: the kubernetes package is some 17 MiB of the agent's RSS.
    kubeconfig = tmp_path / "kubeconfig"
    user = {"token": api_server.auth.admin_token}
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": api_server.url}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    before = len([r for r in api_server.requests if r.path.endswith("/tokenreviews")])
    cmd = [sys.executable, "-c", REVIEW_PROBE, str(kubeconfig)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout[:500]
    assert len([r for r in api_server.requests if r.path.endswith("/tokenreviews")]) > before
