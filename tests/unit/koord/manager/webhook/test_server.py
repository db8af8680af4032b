"""koord-manager's webhook server with the test API server: the Secret made with Koordinator's keys and
reused, HTTPS verified by the Secret's CA, AdmissionReview answered in the version asked (a JSON patch for
the mutation), and a handler that fails answers 500 so kube-apiserver's failurePolicy decides."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from koord.manager.webhook import certs
from koord.manager.webhook.server import WebhookConfig, Webhooks, from_environment
from koordshared.kube.client import ApiError
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.managerharness import manager_config, running_manager, wait_until


def review(obj: dict[str, Any], operation: str = "CREATE", version: str = "v1") -> bytes:
    return json.dumps(
        {
            "apiVersion": f"admission.k8s.io/{version}",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": operation,
                "namespace": "default",
                "name": "p",
                "object": obj,
            },
        }
    ).encode()


BE_PROD = {
    "metadata": {"name": "p", "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE"}},
    "spec": {"priority": 9000, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


def test_from_environment_reads_koordinators_variables() -> None:
    assert from_environment({}, "ns", "cfg") is None
    cfg = from_environment(
        {"WEBHOOK_PORT": "9876", "POD_NAMESPACE": "kube-x", "WEBHOOK_HOST": "10.0.0.1"}, "n", "c"
    )
    assert cfg is not None and (cfg.port, cfg.namespace, cfg.dns_name) == (9876, "kube-x", "10.0.0.1")
    assert WebhookConfig(port=1).dns_name == "koordinator-webhook-service.koordinator-system.svc"
    with pytest.raises(ValueError, match="WEBHOOK_PORT"):
        from_environment({"WEBHOOK_PORT": "x"}, "n", "c")


def test_answers_in_the_version_asked_and_fails_with_500_for_failure_policy() -> None:
    hooks = Webhooks(None, WebhookConfig(port=0), 1.0)
    status, body = hooks.answer("/validate-pod", review(BE_PROD, version="v1beta1"))
    doc = json.loads(body)
    assert status == 200 and doc["apiVersion"] == "admission.k8s.io/v1beta1"
    assert doc["response"]["uid"] == "u-1" and doc["response"]["allowed"] is False
    assert "priorityClass=koord-prod cannot be used in combination" in doc["response"]["status"]["message"]

    def unreachable(what: str, path: str) -> Any:
        raise ApiError(what, 503, "ServiceUnavailable", "down")

    hooks._get = unreachable  # type: ignore[method-assign]
    assert hooks.answer("/mutate-pod", review(BE_PROD))[0] == 500
    assert hooks.answer("/validate-pod", b"{")[0] == 400
    assert hooks.answer("/nothing", review(BE_PROD))[0] == 404


def test_the_mutation_answers_a_json_patch() -> None:
    hooks = Webhooks(None, WebhookConfig(port=0), 1.0)
    profile = {"metadata": {"name": "be"}, "spec": {"qosClass": "BE", "schedulerName": "koord-scheduler"}}
    answers = {"/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles": {"items": [profile]}}
    hooks._get = lambda what, path: answers[path]  # type: ignore[method-assign]
    status, body = hooks.answer(
        "/mutate-pod", review({"metadata": {"name": "p"}, "spec": {"containers": []}})
    )
    resp = json.loads(body)["response"]
    assert status == 200 and resp["allowed"] and resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"]))
    assert {"op": "add", "path": "/spec/schedulerName", "value": "koord-scheduler"} in ops


def post(port: int, ca: Path, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        conn.close()


def test_the_secret_is_made_once_and_the_server_speaks_tls_with_its_ca(
    api_server: APIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    api_server.store.create("namespaces", {"metadata": {"name": "koordinator-system"}}, keep_status=False)
    cfg = WebhookConfig(port=0)
    with running_manager(api_server, webhook=cfg) as m:
        assert m.manager.webhook is not None
        wait_until(m.manager.webhook.has_synced, 20, "webhook certificates ready")
        secret = api_server.store.get("secrets", "koordinator-webhook-certs", namespace="koordinator-system")
        assert {"ca-cert.pem", "ca-key.pem", "cert.pem", "key.pem"} <= set(secret["data"])
        stored = certs.from_secret(secret["data"])
        assert stored is not None
        ca = tmp_path / "ca.pem"
        ca.write_bytes(stored.ca_cert)
        status, doc = post(m.manager.webhook.port, ca, "/validate-pod", review(BE_PROD))
        assert status == 200 and doc["response"]["allowed"] is False
        rv = secret["metadata"]["resourceVersion"]
    # A second manager (another replica, or a restart) takes the stored certificates as they are.
    with running_manager(api_server, webhook=cfg) as m:
        assert m.manager.webhook is not None
        wait_until(m.manager.webhook.has_synced, 20, "webhook certificates ready")
        again = api_server.store.get("secrets", "koordinator-webhook-certs", namespace="koordinator-system")
        assert again["metadata"]["resourceVersion"] == rv


def test_the_harness_config_has_no_webhook(api_server: APIServer) -> None:  # noqa: F811
    assert manager_config(api_server).webhook is None
