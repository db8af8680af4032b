"""Our own kubeconfig and in-cluster loader and the lean client on it: what a kubeconfig says (files
relative to it, inline data, token or token file), what is left to the official client, errors that name
the problem, and lists, watches and error answers over TLS without the ``kubernetes`` package."""

from __future__ import annotations

import base64
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing import wait_until
from koordshared.apis.meta import groups
from koordshared.kube import kubeconfig
from koordshared.kube.client import (
    ApiError,
    close_client,
    make_client,
    official_client,
    request,
    throttle,
    twin_client,
)
from koordshared.kube.informers import InformerSet, Watch
from koordshared.kube.kubeconfig import Endpoint, Token, from_kubeconfig, in_cluster
from koordshared.kube.ratelimit import TokenBucket
from koordshared.kube.transport import LeanClient, StatusError
from koordshared.runtime.errors import ConfigError
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.support.pki import make_pki


def write(path: Path, doc: Any) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def config(cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
        **extra,
    }


def test_files_resolve_beside_the_kubeconfig_and_data_is_decoded(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    doc = config(
        {"server": "https://10.0.0.1:6443/", "certificate-authority": "ca.crt"},
        {"client-certificate": "sub/c.crt", "client-key": "/abs/c.key", "tokenFile": "tok"},
    )
    ep = from_kubeconfig(write(tmp_path / "sub" / "kc", doc))
    assert ep == Endpoint(
        server="https://10.0.0.1:6443",
        ca_file=str(tmp_path / "sub" / "ca.crt"),
        cert_file=str(tmp_path / "sub" / "sub" / "c.crt"),
        key_file="/abs/c.key",
        token_file=str(tmp_path / "sub" / "tok"),
    )
    pem = b"-----BEGIN CERTIFICATE-----\n"
    doc = config(
        {"server": "http://h", "certificate-authority-data": base64.b64encode(pem).decode()},
        {"token": "t"},
    )
    assert from_kubeconfig(write(tmp_path / "kc2", doc)) == Endpoint(
        server="http://h", ca_data=pem, token="t"
    )


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://h", "proxy-url": "http://proxy"}, {"token": "t"}),
        ({"server": "https://h", "tls-server-name": "api"}, {"token": "t"}),
        ({"server": "https://h"}, {"exec": {"command": "get-token"}}),
        ({"server": "https://h"}, {"auth-provider": {"name": "oidc"}}),
        ({"server": "https://h"}, {"username": "a", "password": "b"}),
    ],
)
def test_what_only_the_official_client_does_is_left_to_it(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    assert from_kubeconfig(write(tmp_path / "kc", config(cluster, user))) is None


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ("clusters: [", "not YAML"),
        (["a"], "not a kubeconfig"),
        (config({"server": "https://h"}, {}, **{"current-context": ""}), "no current-context"),
        (config({"server": "https://h"}, {}, **{"current-context": "y"}), "no context named 'y'"),
        ({**config({"server": "https://h"}, {}), "clusters": []}, "no cluster named 'c'"),
        ({**config({"server": "https://h"}, {}), "users": []}, "no user named 'u'"),
        (config({}, {}), "cluster 'c' has no http(s) server"),
        (
            config({"server": "https://h"}, {"client-certificate": "c.crt"}),
            "a client certificate or key, not both",
        ),
        (config({"server": "https://h", "certificate-authority-data": "%%"}, {}), "not base64"),
    ],
)
def test_errors_name_the_problem(tmp_path: Path, doc: Any, named: str) -> None:
    path = tmp_path / "kc"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        from_kubeconfig(str(path))
    assert named in str(err.value) and str(path) in str(err.value)


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="kc-missing"):
        from_kubeconfig(str(tmp_path / "kc-missing"))
    with pytest.raises(ConfigError, match=r"certificate-authority .*nope\.crt"):
        Endpoint(server="https://h", ca_file=str(tmp_path / "nope.crt")).ssl_context()
    with pytest.raises(ConfigError, match=r"tokenFile .*tok-missing"):
        Token(Endpoint(server="https://h", token_file=str(tmp_path / "tok-missing")))()


def test_inline_client_certificate_is_loaded_through_a_removed_private_file(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    ep = Endpoint(
        server="https://h",
        ca_file=str(pki / "ca.crt"),
        cert_data=(pki / "client.crt").read_bytes(),
        key_data=(pki / "client.key").read_bytes(),
    )
    before = set(Path(tempfile.gettempdir()).glob("koord-tls-*"))
    ep.ssl_context()
    assert set(Path(tempfile.gettempdir()).glob("koord-tls-*")) == before
    with pytest.raises(ConfigError, match="client-certificate and client-key"):
        Endpoint(server="https://h", cert_data=b"junk", key_data=b"junk").ssl_context()


def test_token_file_is_read_again_after_a_minute(tmp_path: Path) -> None:
    tok = tmp_path / "token"
    tok.write_text("one\n")
    now = [0.0]
    token = Token(Endpoint(server="https://h", token_file=str(tok)), clock=lambda: now[0])
    assert token() == "one"
    tok.write_text("two")
    now[0] = kubeconfig.TOKEN_REREAD - 1
    assert token() == "one"
    now[0] = kubeconfig.TOKEN_REREAD
    assert token() == "two"
    tok.unlink()  # a rotation caught mid-way keeps the last token
    now[0] *= 3
    assert token() == "two"


def test_in_cluster(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError, match="not in a cluster"):
        in_cluster({}, str(tmp_path))
    with pytest.raises(ConfigError, match=f"{tmp_path}/token is missing"):
        in_cluster(env, str(tmp_path))
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("")
    assert in_cluster(env, str(tmp_path)) == Endpoint(
        server="https://[fd00::1]:443", ca_file=str(tmp_path / "ca.crt"), token_file=str(tmp_path / "token")
    )


def test_lean_client_lists_watches_and_maps_errors_over_tls(
    api_server_factory: Callable[..., APIServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    server = api_server_factory(tls=True, authorization=True)
    client = make_client(write(tmp_path / "kc", server.kubeconfig()), user_agent="lean/2")
    assert isinstance(client, LeanClient)
    events = twin_client(client)
    assert isinstance(events, LeanClient) and events.transport is not client.transport
    waits: list[float] = []
    throttle(client, TokenBucket(1000.0, 1000, lambda: 0.0), waits.append)
    server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    informers = InformerSet(client, [Watch("nodes", groups.NODES)], request_timeout=5.0)
    stop = threading.Event()
    threads = [threading.Thread(target=inf.run, args=(stop,)) for inf in informers]
    for t in threads:
        t.start()
    try:
        assert wait_until(lambda: informers.has_synced() and informers["nodes"].watches == 1, 10)
        server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
        assert wait_until(lambda: len(informers["nodes"]) == 2, 10)
        with pytest.raises(ApiError) as err:
            request(client, "get", "GET", "/api/v1/namespaces/nope")
        assert err.value.not_found and isinstance(err.value.__cause__, StatusError)
        official = official_client(client)  # for typed API calls: made once, closed with the client
        assert official is official_client(client) and official.configuration.host == server.url
    finally:
        stop.set()
        informers.close()
        for t in threads:
            t.join(5)
        close_client(client)
        close_client(events)
    assert not any(t.is_alive() for t in threads)
    agents = {r.headers.get("User-Agent") for r in server.requests if r.path.startswith("/api/v1/nodes")}
    assert agents == {"lean/2"}
