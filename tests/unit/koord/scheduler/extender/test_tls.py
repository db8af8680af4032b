"""TLS: the extender serves HTTPS with its key pair and, given a client CA, requires client certificates
signed by it (kube-scheduler's ``tlsConfig.certFile/keyFile/caFile``). Certificates are made with openssl."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

import pytest

from koordshared.runtime.errors import ConfigError
from koordshared.runtime.httpaccess import TLSConfig, ssl_context
from tests.support.pki import make_pki
from tests.support.scheduler.extenderenv import ServedExtender

pytestmark = pytest.mark.tool("openssl")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


def call(port: int, ctx: ssl.SSLContext) -> tuple[int, object]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
    try:
        body = json.dumps(
            {"Pod": {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}, "NodeNames": []}
        )
        conn.request("POST", "/filter", body=body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def client_context(pki: Path, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if with_cert:
        ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    return ctx


def test_https_with_client_certificates(pki: Path) -> None:
    tls = ssl_context(TLSConfig(str(pki / "server.crt"), str(pki / "server.key"), str(pki / "ca.crt")))
    e = ServedExtender(tls=tls)
    try:
        status, res = call(e.server.port, client_context(pki, with_cert=True))
        assert status == 200 and res["NodeNames"] == []  # type: ignore[index]
        with pytest.raises((ssl.SSLError, ConnectionError)):
            call(e.server.port, client_context(pki, with_cert=False))
        # the server keeps serving after a refused handshake
        assert call(e.server.port, client_context(pki, with_cert=True))[0] == 200
    finally:
        e.close()


def test_https_without_client_ca_accepts_any_client(pki: Path) -> None:
    tls = ssl_context(TLSConfig(str(pki / "server.crt"), str(pki / "server.key")))
    e = ServedExtender(tls=tls)
    try:
        assert call(e.server.port, client_context(pki, with_cert=False))[0] == 200
    finally:
        e.close()


def test_bad_key_pair_names_the_flag(pki: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--tls-cert-file"):
        ssl_context(TLSConfig(str(tmp_path / "missing.crt"), str(pki / "server.key")))
    with pytest.raises(ConfigError, match="--client-ca-file"):
        ssl_context(TLSConfig(str(pki / "server.crt"), str(pki / "server.key"), str(tmp_path / "nope.crt")))
