"""Replacing Koordinator's koordlet (deploy/README.md), on the test API server with RBAC
enforced: a cluster installed by Koordinator's chart (its koordlet ServiceAccount, ClusterRole
``koordlet-role`` with wildcards and ClusterRoleBinding ``koordlet-rolebinding``), then the documented
``kubectl apply`` of our RBAC: the agent's ServiceAccount keeps every call the agent makes and loses the
wildcards (before the rename, ours sat next to Koordinator's and the wildcards stayed in force)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from koordshared.kube.client import make_api_client
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server_factory  # noqa: F401
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy" / "daemonset"
NS, SA = "koordinator-system", "koordlet"
HELM = {
    "labels": {"app.kubernetes.io/managed-by": "Helm"},
    "annotations": {"meta.helm.sh/release-name": "koordinator", "meta.helm.sh/release-namespace": "default"},
}


def koordinator_chart_objects() -> list[dict[str, Any]]:
    """The koordlet RBAC of koordinator-sh/charts v1.8.0 (templates/rbac/koordlet.yaml), as installed."""
    everything = ["*"]
    rw = ["patch", "update", "get", "list", "watch"]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": NS, **HELM}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "koordlet-role", **HELM},
            "rules": [
                {
                    "apiGroups": [
                        "config.koordinator.sh",
                        "slo.koordinator.sh",
                        "scheduling.koordinator.sh",
                        "topology.node.k8s.io",
                    ],
                    "resources": everything,
                    "verbs": everything,
                },
                {"apiGroups": [""], "resources": ["configmaps", "configmaps/status"], "verbs": everything},
                {
                    "apiGroups": [""],
                    "resources": [
                        "nodes",
                        "nodes/status",
                        "nodes/proxy",
                        "pods",
                        "pods/status",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                    ],
                    "verbs": rw,
                },
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": everything},
                {"apiGroups": [""], "resources": ["events"], "verbs": everything},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "koordlet-rolebinding", **HELM},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "koordlet-role",
            },
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}],
        },
    ]


def apply(admin: Any, manifest: Path) -> list[str]:
    """What ``kubectl apply -f`` does to each RBAC object: create it, or patch an existing one (rules and
    subjects are lists without a merge key: replaced whole, as a strategic merge patch replaces them)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    rbac = client.RbacAuthorizationV1Api(admin)
    done = []
    for doc in yaml.safe_load_all(manifest.read_text()):
        kind, name = doc["kind"], doc["metadata"]["name"]
        calls: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "ClusterRole": (rbac.create_cluster_role, rbac.patch_cluster_role),
            "ClusterRoleBinding": (rbac.create_cluster_role_binding, rbac.patch_cluster_role_binding),
        }
        create, patch = calls[kind]
        try:
            create(doc)
            done.append(f"{kind}/{name} created")
        except ApiException as err:
            assert err.status == 409, err
            patch(name, doc)
            done.append(f"{kind}/{name} configured")
    return done


def status_of(call: Callable[[], object]) -> int:
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as err:
        return int(err.status)
    return 200


def test_applying_our_rbac_over_koordinators_drops_its_wildcards(
    api_server_factory: Callable[..., APIServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    from kubernetes import client

    server = api_server_factory(authorization=True)
    server.apply(*koordinator_chart_objects())
    server.apply({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n1"}})
    api = make_api_client(client_configuration=server.client_config(f"{NS}/{SA}"))
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def delete_nodeslo() -> int:
        return status_of(
            lambda: co.delete_cluster_custom_object("slo.koordinator.sh", "v1alpha1", "nodeslos", "n1")
        )

    def agent_calls() -> list[int]:
        return [
            status_of(lambda: core.list_node(field_selector="metadata.name=n1")),
            status_of(lambda: core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")),
            status_of(lambda: co.list_cluster_custom_object("slo.koordinator.sh", "v1alpha1", "nodeslos")),
            status_of(
                lambda: co.replace_cluster_custom_object_status(
                    "slo.koordinator.sh",
                    "v1alpha1",
                    "nodemetrics",
                    "n1",
                    {
                        "apiVersion": "slo.koordinator.sh/v1alpha1",
                        "kind": "NodeMetric",
                        "metadata": {"name": "n1", "resourceVersion": "1"},
                        "status": {},
                    },
                )
            ),
        ]

    assert (
        status_of(
            lambda: co.patch_cluster_custom_object(
                "slo.koordinator.sh", "v1alpha1", "nodeslos", "n1", {"spec": {}}
            )
        )
        == 200
    )  # the chart's wildcard
    # The documented migration: our RBAC applied over the chart's objects, which it takes over by name.
    admin = make_api_client(client_configuration=server.client_config())
    assert apply(admin, DEPLOY / "rbac.yaml") == [
        "ClusterRole/koordlet-role configured",
        "ClusterRoleBinding/koordlet-rolebinding configured",
    ]
    assert delete_nodeslo() == 403  # no wildcard left
    assert status_of(lambda: core.patch_node("n1", {"metadata": {"labels": {"x": "y"}}})) == 403
    assert 403 not in agent_calls()  # 404 (no NodeMetric n1) is allowed-but-absent
    role = client.RbacAuthorizationV1Api(admin).read_cluster_role("koordlet-role")
    assert role.rules is not None
    assert not any("*" in (r.verbs or []) + (r.resources or []) for r in role.rules)
