"""The states informer's cluster modes: a kubeconfig selects cluster mode and its token is sent; an absent
NodeMetric is skipped or created; the kubelet is read over HTTPS with an explicit token and CA, or with
the kubeconfig's credentials (token, token file, client certificate), and never before the Node is seen;
pods from the API server follow the shared informer (its events and its health), not a polling period."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.testing.kubelet import FakeKubelet, make_cert, pod_object
from koordshared.runtime.lifecycle import wait_for
from tests import crdschema
from tests.apiserver import APIServer
from tests.apiserver.fixtures import NODEMETRIC_CRD
from tests.integration.cluster import NEVER, NODE, Cluster, node_obj


def kubeconfig_file(path: Path, server: str, user: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": server}}],
                "users": [{"name": "koordlet", "user": user}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "koordlet"}}],
                "current-context": "test",
            }
        )
    )
    return path


def test_kubeconfig_selects_cluster_mode(
    cluster_factory: Callable[..., Cluster],
    api_server: APIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = kubeconfig_file(tmp_path / "kubeconfig", api_server.url, {"token": "t"})
    c = cluster_factory(client_configuration=None, kubeconfig=str(kubeconfig), standalone=None)
    assert not c.informer.standalone
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    node = c.informer.node()
    assert node is not None and node.name == NODE
    auth = [
        {k.lower(): v for k, v in r.headers.items()}.get("authorization")
        for r in c.server.requests
        if r.path.startswith("/api/v1/nodes")
    ]
    assert auth and all(a == "Bearer t" for a in auth)


@pytest.mark.parametrize("create", [False, True])
def test_nodemetric_absent_is_skipped_or_created(
    cluster_factory: Callable[..., Cluster], create: bool
) -> None:
    c = cluster_factory(with_nodemetric=False, create_node_metric=create)
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)

    def status() -> dict[str, Any] | None:
        try:
            return c.nodemetric().get("status")
        except Exception:  # the store raises its 404 APIError while the object does not exist
            return None

    if not create:
        # koordlet never creates it: reports are skipped while slo-controller has not made it
        assert wait_for(
            lambda: (
                (c.registry.get_sample_value("koordlet_nodemetric_report_total", {"result": "skipped"}) or 0)
                >= 2
            ),
            NEVER,
            timeout=8,
        )
        assert status() is None
        assert not any(r.method in ("POST", "PATCH") and "nodemetrics" in r.path for r in c.server.requests)
        return
    assert wait_for(lambda: bool(status()), NEVER, timeout=10)
    crdschema.validate(status(), NODEMETRIC_CRD, "status")
    assert c.nodemetric()["metadata"]["name"] == NODE


@pytest.mark.tool("openssl")
def test_kubelet_over_https_with_token(cluster_factory: Callable[..., Cluster], tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    kubelet = FakeKubelet(tls_dir=tmp_path, token="sa-token").start()
    c = cluster_factory(
        kubelet=kubelet,
        kubelet_insecure_tls=False,
        kubelet_port=0,  # from the Node's daemonEndpoints
        kubelet_token_file=str(token),
        kubelet_ca_file=str(kubelet.cert),
    )
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert sorted(p.name for p in c.informer.pods()) == ["web-0", "web-1", "web-2"]
    assert set(kubelet.auth_headers) == {"Bearer sa-token"}


@pytest.mark.tool("openssl")
@pytest.mark.parametrize("user", ["token", "tokenFile"])
def test_kubelet_gets_the_kubeconfigs_token(
    cluster_factory: Callable[..., Cluster],
    api_server: APIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    user: str,
) -> None:
    # A host process beside a kubelet with webhook authentication: no service account, only --kubeconfig.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    token = tmp_path / "kubelet-token"
    token.write_text("first")  # no newline: the client library sends a tokenFile's text unstripped
    credentials = {"token": "first"} if user == "token" else {"tokenFile": "kubelet-token"}  # relative
    kubeconfig = kubeconfig_file(tmp_path / "kubeconfig", api_server.url, credentials)
    kubelet = FakeKubelet(tls_dir=tmp_path, token="first").start()
    c = cluster_factory(
        kubelet=kubelet,
        client_configuration=None,
        kubeconfig=str(kubeconfig),
        standalone=None,
        kubelet_insecure_tls=False,
        kubelet_port=0,
    )
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert sorted(p.name for p in c.informer.pods()) == ["web-0", "web-1", "web-2"]
    assert set(kubelet.auth_headers) == {"Bearer first"}
    if user == "tokenFile":
        # read again for every request: a rotated token is sent at once
        token.write_text("second")
        kubelet.token = "second"
        n = len(kubelet.auth_headers)
        assert wait_for(lambda: "Bearer second" in kubelet.auth_headers[n:], NEVER, timeout=5)


@pytest.mark.tool("openssl")
@pytest.mark.parametrize("via", ["configuration", "kubeconfig"])
def test_kubelet_gets_the_kubeconfigs_client_certificate(
    cluster_factory: Callable[..., Cluster],
    api_server: APIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    via: str,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "client").mkdir()
    cert, key = make_cert(tmp_path / "client")
    kubelet = FakeKubelet(tls_dir=tmp_path, client_ca=cert).start()
    options: dict[str, Any]
    if via == "configuration":
        # The client library loads certificates only for an https server; the test API server speaks
        # http, so the user's certificate is given the way an https kubeconfig would leave it.
        from kubernetes import client

        configuration = client.Configuration(host=api_server.url)
        configuration.api_key = dict(api_server.client_config().api_key)
        configuration.cert_file, configuration.key_file = str(cert), str(key)
        options = {"client_configuration": configuration}
    else:  # the lean client keeps the user's certificate and key files whatever the server's scheme
        user = {"token": "t", "client-certificate": str(cert), "client-key": str(key)}
        kubeconfig = kubeconfig_file(tmp_path / "kubeconfig", api_server.url, user)
        options = {"client_configuration": None, "kubeconfig": str(kubeconfig), "standalone": None}
    c = cluster_factory(kubelet=kubelet, kubelet_insecure_tls=False, kubelet_port=0, **options)
    assert wait_for(lambda: len(c.informer.pods()) == 3, NEVER, timeout=10)


def test_no_kubelet_call_before_the_node_is_seen(cluster_factory: Callable[..., Cluster]) -> None:
    # The kubelet's address and port are the Node's: nothing is asked of a guessed port before it.
    c = cluster_factory(with_node=False)
    NEVER.wait(1.5)  # three pod sync intervals, and PLEG-less: nothing else asks
    assert c.kubelet.requests == 0 and c.informer.pods() == ()
    c.server.store.create("nodes", node_obj(c.kubelet.port))
    assert wait_for(lambda: len(c.informer.pods()) == 3, NEVER, timeout=5)
    kept = c.registry.get_sample_value("koordlet_pods_refresh_total", {"result": "kept"}) or 0
    assert kept == 0, "no refresh failed for want of the Node"


def test_api_pods_follow_the_informer_not_the_refresh_period(cluster_factory: Callable[..., Cluster]) -> None:
    # A refresh period far beyond the test: every refresh seen comes from the informer (its first list,
    # a watch event, its recovery from an outage).
    c = cluster_factory(pod_source="api", kubelet_sync_interval=600.0, pods_staleness_seconds=1.5)
    assert wait_for(c.informer.has_synced, NEVER, timeout=10)
    assert sorted(p.name for p in c.informer.pods()) == ["web-0", "web-1", "web-2"]
    web7 = pod_object("00000000-0000-4000-8000-000000000007", "web-7")
    web7["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {}}]
    c.server.store.create("pods", web7, "default")
    assert wait_for(lambda: any(p.name == "web-7" for p in c.informer.pods()), NEVER, timeout=5)
    cached = c.informer.informers["pods"].get("default/web-7")
    assert cached is not None and "managedFields" not in cached["metadata"]  # not kept by the agent

    c.server.down()
    try:
        assert wait_for(c.informer.degraded, NEVER, timeout=10)
        assert len(c.informer.pods()) == 4  # kept
    finally:
        answered_before_up = len(c.server.requests)
        c.server.up()
    # the watch resumes (backoff capped at 2 s) and the pods are trusted again at once, without a list
    assert wait_for(lambda: not c.informer.degraded(), NEVER, timeout=6)
    c.server.store.delete("pods", "web-7", "default")
    assert c.server.kubelet.confirm("default", "web-7")  # terminated on its node: the object goes
    assert wait_for(lambda: all(p.name != "web-7" for p in c.informer.pods()), NEVER, timeout=5)
    pod_lists = [
        r
        for r in c.server.requests[answered_before_up:]
        if r.path == "/api/v1/pods" and r.query.get("watch") != "true"
    ]
    assert pod_lists == []
