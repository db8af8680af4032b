"""Leases, ConfigMaps, PodDisruptionBudgets and bindings through the official client, and their discovery."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.unit.apiserver.helpers import clients, pod


def _api(server: APIServer) -> Any:
    from kubernetes import client

    return client.ApiClient(server.client_config())


def test_discovery_lists_the_new_types_and_subresources(api_server: APIServer) -> None:
    """kube-apiserver's discovery (``endpoints/discovery``): each served resource with its verbs; bindings
    is create-only, pods/binding a create subresource (``pkg/registry/core/rest/storage_core.go``)."""
    from kubernetes import client

    api = _api(api_server)
    core = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert core["bindings"].verbs == ["create"] and core["bindings"].namespaced
    assert core["pods/binding"].verbs == ["create"]
    short_names = core["configmaps"].short_names
    assert short_names is not None and "cm" in short_names
    coord = {r.name for r in client.CoordinationV1Api(api).get_api_resources().resources}
    assert coord == {"leases"}
    policy = {r.name: r for r in client.PolicyV1Api(api).get_api_resources().resources}
    assert {"poddisruptionbudgets", "poddisruptionbudgets/status"} <= set(policy)
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"coordination.k8s.io", "policy"} <= groups


def test_lease_crud(api_server: APIServer) -> None:
    """``pkg/registry/coordination/lease`` serves Leases in ``coordination.k8s.io/v1``."""
    from kubernetes import client

    coord = client.CoordinationV1Api(_api(api_server))
    when = datetime.datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=datetime.UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="koord-manager", namespace="kube-system"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15, renew_time=when),
    )
    created = coord.create_namespaced_lease("kube-system", body)
    assert created.spec is not None and created.spec.renew_time == when
    created.spec.holder_identity = "b"
    replaced = coord.replace_namespaced_lease("koord-manager", "kube-system", created)
    assert replaced.spec is not None and replaced.spec.holder_identity == "b"
    listed = coord.list_namespaced_lease("kube-system").items
    assert [ls.metadata.name if ls.metadata else None for ls in listed] == ["koord-manager"]
    coord.delete_namespaced_lease("koord-manager", "kube-system")
    assert coord.list_namespaced_lease("kube-system").items == []


def test_configmap_crud(api_server: APIServer) -> None:
    """Core ConfigMaps (``pkg/registry/core/configmap``)."""
    core, _ = clients(api_server)
    from kubernetes import client

    cm = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="slo-controller-config", namespace="koordinator-system"),
        data={"colocation-config": "{}"},
    )
    api_server.store.create("namespaces", {"metadata": {"name": "koordinator-system"}})
    core.create_namespaced_config_map("koordinator-system", cm)
    core.patch_namespaced_config_map(
        "slo-controller-config", "koordinator-system", {"data": {"resource-threshold-config": "{}"}}
    )
    got = core.read_namespaced_config_map("slo-controller-config", "koordinator-system")
    assert got.data == {"colocation-config": "{}", "resource-threshold-config": "{}"}


def test_pdb_create_drops_status_and_status_subresource_sets_it(api_server: APIServer) -> None:
    """``pkg/registry/policy/poddisruptionbudget/strategy.go``: PrepareForCreate clears status; the
    status subresource changes status only."""
    from kubernetes import client

    policy = client.PolicyV1Api(_api(api_server))
    pdb = client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="web", namespace="default"),
        spec=client.V1PodDisruptionBudgetSpec(
            min_available=1, selector=client.V1LabelSelector(match_labels={"app": "web"})
        ),
        status=client.V1PodDisruptionBudgetStatus(
            current_healthy=9, desired_healthy=9, disruptions_allowed=9, expected_pods=9
        ),
    )
    created = policy.create_namespaced_pod_disruption_budget("default", pdb)
    assert created.status is None or created.status.disruptions_allowed != 9
    assert created.metadata is not None and created.metadata.generation == 1
    budgets = policy.list_pod_disruption_budget_for_all_namespaces().items
    names = [p.metadata.name if p.metadata else None for p in budgets]
    assert names == ["web"]


def test_binding_subresource_and_bindings_collection(api_server: APIServer) -> None:
    """``BindingREST.Create`` (``pkg/registry/core/pod/storage/storage.go``): 201 and ``spec.nodeName``
    set with PodScheduled=True; a second binding of a bound pod is 409 on ``pods/binding``."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    for name in ("a", "b"):
        core.create_namespaced_pod("default", pod(name, node=""))
    target = client.V1ObjectReference(kind="Node", name="node-1")
    binding = client.V1Binding(metadata=client.V1ObjectMeta(name="a"), target=target)
    resp = core.create_namespaced_pod_binding("a", "default", binding, _preload_content=False)
    assert resp.status == 201 and json.loads(resp.data)["status"] == "Success"
    bound = core.read_namespaced_pod("a", "default")
    assert bound.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("a", "default", binding, _preload_content=False)
    assert err.value.status == 409 and err.value.body is not None
    assert 'pods/binding "a"' in json.loads(err.value.body)["message"]
    legacy = client.V1Binding(metadata=client.V1ObjectMeta(name="b"), target=target)
    resp = core.create_namespaced_binding("default", legacy, _preload_content=False)
    assert resp.status == 201
    assert core.read_namespaced_pod("b", "default").spec.node_name == "node-1"


def test_binding_name_must_match_the_url(api_server: APIServer) -> None:
    """``BindingREST.Create``: a Binding named unlike the pod in the URL is a 400."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("a", node=""))
    wrong = client.V1Binding(
        metadata=client.V1ObjectMeta(name="other"), target=client.V1ObjectReference(kind="Node", name="n")
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("a", "default", wrong, _preload_content=False)
    assert err.value.status == 400
    assert not core.read_namespaced_pod("a", "default").spec.node_name
