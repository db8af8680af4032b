"""Deployments, DaemonSets, Services, Secrets as stored objects with the defaults clients rely on, the
scale subresource, TokenRequest and the self reviews, and TLS, through the official client."""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.unit.apiserver.helpers import error_status


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer() as api:
        yield api


def _apis(server: APIServer, **config: Any) -> tuple[Any, Any]:
    from kubernetes import client

    api = client.ApiClient(server.client_config(**config))
    return client.CoreV1Api(api), client.AppsV1Api(api)


def _template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]},
    }


def test_deployment_defaults_validation_and_scale(server: APIServer) -> None:
    """``SetDefaults_Deployment``: 1 replica, RollingUpdate 25 %/25 %, 10 revisions, 600 s deadline, the
    template defaulted as a pod; the selector must match the template and cannot change; ``/scale``
    reads and writes ``spec.replicas`` (autoscaling/v1 Scale, the selector as a string)."""
    from kubernetes.client.exceptions import ApiException

    _, apps = _apis(server)
    body = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": _template("web")},
    }
    made = apps.create_namespaced_deployment("default", body)
    spec = made.spec
    assert (spec.replicas, spec.revision_history_limit, spec.progress_deadline_seconds) == (1, 10, 600)
    assert (spec.strategy.type, spec.strategy.rolling_update.max_surge) == ("RollingUpdate", "25%")
    container = spec.template.spec.containers[0]
    assert (container.image_pull_policy, container.ports[0].protocol) == ("IfNotPresent", "TCP")
    assert (spec.template.spec.restart_policy, spec.template.spec.scheduler_name) == (
        "Always",
        "default-scheduler",
    )
    bad = {
        "metadata": {"name": "bad"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": _template("web")},
    }
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("default", bad)
    code, status_ = error_status(err)
    assert code == 422 and "spec.template.metadata.labels" in status_["message"]
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment(
            "web", "default", {"spec": {"selector": {"matchLabels": {"app": "y"}}}}
        )
    assert error_status(err)[0] == 422
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=web")
    scaled = apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    assert scaled.spec.replicas == 3
    after = apps.read_namespaced_deployment("web", "default")
    assert (after.spec.replicas, after.metadata.generation) == (3, 2)


def test_daemonset_defaults_and_empty_status(server: APIServer) -> None:
    _, apps = _apis(server)
    body = {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": _template("agent")},
    }
    made = apps.create_namespaced_daemon_set("default", body)
    assert made.spec.update_strategy.type == "RollingUpdate"
    assert (
        made.spec.update_strategy.rolling_update.max_unavailable,
        made.spec.update_strategy.rolling_update.max_surge,
    ) == (1, 0)
    assert (made.status.desired_number_scheduled, made.status.number_ready) == (0, 0)


def test_service_allocation_and_defaults(server: APIServer) -> None:
    """The Service REST storage allocates a free cluster IP (and node ports); defaults fill the rest;
    an update that leaves the allocated values out keeps them; a taken IP is refused."""
    from kubernetes.client.exceptions import ApiException

    core, _ = _apis(server)

    def service(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec},
        }

    first = core.create_namespaced_service("default", service("a"))
    second = core.create_namespaced_service("default", service("b", type="NodePort"))
    assert first.spec.cluster_ip != second.spec.cluster_ip and first.spec.cluster_ip.startswith("10.96.")
    assert (first.spec.ports[0].target_port, first.spec.ports[0].protocol) == (80, "TCP")
    assert (first.spec.session_affinity, first.spec.ip_families, first.spec.internal_traffic_policy) == (
        "None",
        ["IPv4"],
        "Cluster",
    )
    assert (
        30000 <= second.spec.ports[0].node_port <= 32767 and second.spec.external_traffic_policy == "Cluster"
    )
    replaced = core.replace_namespaced_service(
        "a",
        "default",
        {**service("a"), "metadata": {"name": "a", "resourceVersion": first.metadata.resource_version}},
    )
    assert replaced.spec.cluster_ip == first.spec.cluster_ip
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service("default", service("c", clusterIP=first.spec.cluster_ip))
    assert error_status(err)[0] == 422
    headless = core.create_namespaced_service("default", service("h", clusterIP="None"))
    assert headless.spec.cluster_ip == "None"


def test_secret_string_data_and_type(server: APIServer) -> None:
    """``stringData`` is written into ``data`` (base64) and not kept; the type defaults to Opaque and is
    immutable; data that is not base64 does not decode."""
    from kubernetes.client.exceptions import ApiException

    core, _ = _apis(server)
    made = core.create_namespaced_secret(
        "default", {"metadata": {"name": "s"}, "stringData": {"user": "admin"}}
    )
    assert (made.data, made.type, made.string_data) == ({"user": "YWRtaW4="}, "Opaque", None)
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_secret("s", "default", {"type": "kubernetes.io/tls"})
    assert error_status(err)[0] == 422
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret("default", {"metadata": {"name": "t"}, "data": {"k": "not base64!"}})
    assert error_status(err)[0] == 400


@pytest.fixture(scope="module")
def secured() -> Iterator[APIServer]:
    with APIServer(authorization=True, tls=True) as api:
        yield api


@pytest.mark.tool("openssl")
def test_tls_with_the_generated_ca(secured: APIServer) -> None:
    """The official client trusts the server through the generated CA; without it, verification fails."""
    core, _ = _apis(secured)
    assert secured.url.startswith("https://127.0.0.1:")
    assert "kube-system" in {n.metadata.name for n in core.list_namespace().items}
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(f"{secured.url}/healthz", timeout=5)
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)


@pytest.mark.tool("openssl")
def test_token_request_and_self_reviews(secured: APIServer) -> None:
    """``serviceaccounts/<name>/token`` issues a token of that account (an hour by default, at least 10
    minutes); SelfSubjectReview says who the caller is and SelfSubjectRulesReview what RBAC grants it."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, _ = _apis(secured)
    core.create_namespaced_service_account("default", {"metadata": {"name": "bot"}})
    rbac = client.RbacAuthorizationV1Api(client.ApiClient(secured.client_config()))
    # (manifests as dicts: the typed methods' validate_call builds the model, their annotations say only that)
    role = {
        "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }
    rbac.create_namespaced_role("default", role)  # type: ignore[arg-type]
    binding = {
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
    }
    rbac.create_namespaced_role_binding("default", binding)  # type: ignore[arg-type]
    issued = core.create_namespaced_service_account_token("bot", "default", {"spec": {}})
    assert issued.spec.expiration_seconds == 3600 and issued.status.token
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service_account_token("bot", "default", {"spec": {"expirationSeconds": 60}})
    assert error_status(err)[0] == 422
    as_bot = client.ApiClient(secured.client_config(token=issued.status.token))
    who = client.AuthenticationV1Api(as_bot).create_self_subject_review({"metadata": {}})  # type: ignore[arg-type]
    assert who.status is not None and who.status.user_info is not None
    assert who.status.user_info.username == "system:serviceaccount:default:bot"
    review = {"spec": {"namespace": "default"}}
    rules = client.AuthorizationV1Api(as_bot).create_self_subject_rules_review(review)  # type: ignore[arg-type]
    assert rules.status is not None
    granted = [r for r in rules.status.resource_rules if r.resources == ["configmaps"]]
    assert granted and granted[0].verbs == ["get"] and rules.status.incomplete is False
