"""Opt-in authorization: RBAC from the manifests we ship, ServiceAccount tokens, TokenReview and
SubjectAccessReview."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.apiserver import APIServer
from tests.support.paths import ROOT
from tests.unit.apiserver.helpers import raw_call

DEPLOY = ROOT / "deploy" / "daemonset"


@pytest.fixture
def secured(api_server_factory: Callable[..., APIServer]) -> APIServer:
    server = api_server_factory(authorization=True)
    applied = server.apply(DEPLOY / "koordlet.yaml", DEPLOY / "rbac.yaml")
    assert {
        "ServiceAccount/koordlet",
        "ClusterRole/koordlet-role",
        "ClusterRoleBinding/koordlet-rolebinding",
    } <= set(applied)
    return server


def test_anonymous_unknown_token_and_public_paths(secured: APIServer) -> None:
    """Anonymous requests are ``system:anonymous``/``system:unauthenticated`` and see only the public
    info paths (bootstrap ``system:public-info-viewer``); an unknown bearer token is a 401."""
    assert raw_call(secured, "GET", "/healthz")[0] == 200
    assert raw_call(secured, "GET", "/api/v1/pods")[0] == 403
    code, body = raw_call(secured, "GET", "/api/v1/pods", Authorization="Bearer nope")
    assert (code, body["reason"]) == (401, "Unauthorized")
    token = secured.token_for("koordinator-system", "koordlet")
    assert raw_call(secured, "GET", "/api", Authorization=f"Bearer {token}")[0] == 200  # system:discovery


def test_token_of_a_deleted_service_account_stops_working(secured: APIServer) -> None:
    token = secured.token_for("koordinator-system", "koordlet")
    assert raw_call(secured, "GET", "/api/v1/nodes", Authorization=f"Bearer {token}")[0] == 200
    secured.store.delete("serviceaccounts", "koordlet", "koordinator-system")
    assert raw_call(secured, "GET", "/api/v1/nodes", Authorization=f"Bearer {token}")[0] == 401


def test_token_review_and_subject_access_review(secured: APIServer) -> None:
    """``pkg/registry/authentication/tokenreview/storage.go`` and
    ``pkg/registry/authorization/subjectaccessreview/rest.go``: a delegating component (bound to
    ``system:auth-delegator``) learns who a token is and whether that user may do something."""
    secured.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gate", "namespace": "default"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "gate-delegator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:auth-delegator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "gate", "namespace": "default"}],
        },
    )
    gate = {"Authorization": f"Bearer {secured.token_for('default', 'gate')}"}
    caller = secured.token_for("koordinator-system", "koordlet")
    code, tr = raw_call(
        secured,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": caller}},
        **gate,
    )
    assert code == 201 and tr["status"]["authenticated"]
    user = tr["status"]["user"]
    assert user["username"] == "system:serviceaccount:koordinator-system:koordlet"
    assert "system:serviceaccounts:koordinator-system" in user["groups"]

    def sar(verb: str, resource: str, sub: str = "") -> bool:
        attrs = {"verb": verb, "resource": resource, "subresource": sub, "group": ""}
        spec = {"user": user["username"], "groups": user["groups"], "resourceAttributes": attrs}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        code, out = raw_call(
            secured, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body, **gate
        )
        assert code == 201
        return bool(out["status"]["allowed"])

    assert sar("get", "nodes", "proxy") and sar("create", "pods", "eviction")
    assert not sar("create", "nodes", "proxy") and not sar("get", "secrets")
    # an account without system:auth-delegator's rules may not review tokens
    secured.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "plain", "namespace": "default"}}
    )
    plain = {"Authorization": f"Bearer {secured.token_for('default', 'plain')}"}
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": caller}}
    assert raw_call(secured, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body, **plain)[0] == 403
    bogus = {**body, "spec": {"token": "nope"}}
    code, tr = raw_call(secured, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", bogus, **gate)
    assert code == 201 and tr["status"]["authenticated"] is False


def test_authorization_is_off_by_default(api_server: APIServer) -> None:
    assert raw_call(api_server, "GET", "/api/v1/pods")[0] == 200
    assert raw_call(api_server, "GET", "/api/v1/pods", Authorization="Bearer whatever")[0] == 200
