"""The test API server against kube-apiserver's behaviour, one test per divergence found (1-5: served
types, binding, strategic merge patch, eviction, graceful deletion; 6-10 in ``test_kube_fidelity_api``).

Each test names the upstream code it mirrors (kubernetes/kubernetes unless said otherwise) and drives the
server through the official client, as the components under test do.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.apiserver.manifests import CRD_DIR
from tests.unit.apiserver.helpers import api_client, clients, error_status, pod, raw_call

DEPLOY = CRD_DIR.parent


def running(core: Any, name: str, *, ready: bool = True, labels: dict[str, str] | None = None) -> None:
    """A pod created through the API, then reported Running (and Ready) as its kubelet would."""
    core.create_namespaced_pod("default", pod(name, **(labels or {})))
    cond = [{"type": "Ready", "status": "True" if ready else "False"}]
    core.patch_namespaced_pod_status(name, "default", {"status": {"phase": "Running", "conditions": cond}})


def pdb_body(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def test_1_served_types_and_discovery(api_server: APIServer) -> None:
    """Leases (``pkg/registry/coordination/lease/storage``), ConfigMaps (``pkg/registry/core/configmap``),
    PDBs with status (``pkg/registry/policy/poddisruptionbudget/storage/storage.go`` NewREST) and
    bindings (``pkg/registry/core/pod/storage/storage.go`` BindingREST/LegacyBindingREST) are served and
    listed in discovery (``pkg/registry/core/rest/storage_core.go``)."""
    from kubernetes import client

    api = api_client(api_server)
    core = client.CoreV1Api(api)
    # (the typed methods take a manifest as a dict: their validate_call builds the model from it, which
    # their annotations do not say; so the arg-type ignores on such calls here and in the other tests)
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"a": "1"}})  # type: ignore[arg-type]
    client.CoordinationV1Api(api).create_namespaced_lease("default", {"metadata": {"name": "l"}, "spec": {}})  # type: ignore[arg-type]
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget("default", pdb_body("p", {"a": "b"}))  # type: ignore[arg-type]
    served = {r.name: r.verbs for r in core.get_api_resources().resources}
    assert (
        served["bindings"] == ["create"] and served["pods/binding"] == ["create"] and "configmaps" in served
    )
    assert [r.name for r in client.CoordinationV1Api(api).get_api_resources().resources] == ["leases"]
    policy = {r.name for r in client.PolicyV1Api(api).get_api_resources().resources}
    assert {"poddisruptionbudgets", "poddisruptionbudgets/status"} <= policy


def test_2_node_name_is_set_by_binding_only_and_pod_spec_is_immutable(api_server: APIServer) -> None:
    """``ValidatePodUpdate`` (``pkg/apis/core/validation/validation.go``) forbids spec changes other than
    images, activeDeadlineSeconds, added tolerations...; ``BindingREST.Create`` sets ``spec.nodeName``
    once (201, then 409)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("p", node=""))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", "default", {"spec": {"nodeName": "node-a"}})
    code, body = error_status(err)
    assert code == 422 and body["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", "default", {"spec": {"restartPolicy": "Never"}})
    assert err.value.status == 422
    # the fields an update may change
    core.patch_namespaced_pod("p", "default", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}})
    core.patch_namespaced_pod("p", "default", {"spec": {"activeDeadlineSeconds": 60}})
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p"), target=client.V1ObjectReference(name="n1")
    )
    assert core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False).status == 201
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert err.value.status == 409
    got = core.read_namespaced_pod("p", "default")
    assert (got.spec.node_name, got.spec.containers[0].image) == ("n1", "busybox:2")


def test_3_strategic_merge_patch_merges_by_patch_keys(api_server: APIServer) -> None:
    """apimachinery ``strategicpatch`` (``mergeMap``/``mergeSlice``): finalizers are a set, containers
    merge by name, conditions by type, ``$patch: delete`` removes one element; a strategic merge patch
    of a custom resource is a 415 (``endpoints/handlers/patch.go``)."""
    core, _ = clients(api_server)
    body = pod("p")
    body["spec"]["containers"].append({"name": "side", "image": "pause"})
    body["metadata"]["finalizers"] = ["a/x"]
    core.create_namespaced_pod("default", body)
    core.patch_namespaced_pod("p", "default", {"metadata": {"finalizers": ["b/y"]}})
    core.patch_namespaced_pod("p", "default", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}})
    conds = [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
    core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": conds}})
    core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    got = core.read_namespaced_pod("p", "default")
    assert sorted(got.metadata.finalizers) == ["a/x", "b/y"]
    assert [(c.name, c.image) for c in got.spec.containers] == [("c", "busybox:2"), ("side", "pause")]
    assert {(c.type, c.status) for c in got.status.conditions} == {
        ("Ready", "True"),
        ("PodScheduled", "True"),
    }
    core.patch_namespaced_pod("p", "default", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"]}})
    assert core.read_namespaced_pod("p", "default").metadata.finalizers == ["b/y"]
    api_server.store.create("nodemetrics", {"metadata": {"name": "n"}, "spec": {}})
    code, answer = raw_call(
        api_server,
        "PATCH",
        "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n",
        {"spec": {}},
        **{"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert code == 415 and answer["reason"] == "UnsupportedMediaType"


def test_4_eviction_respects_pod_disruption_budgets(api_server: APIServer) -> None:
    """``EvictionREST.Create``/``checkAndDecrement`` (``pkg/registry/core/pod/storage/eviction.go``) with
    the disruption controller's status (``pkg/controller/disruption/disruption.go`` trySync)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = api_client(api_server)
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    for i in range(3):
        running(core, f"web-{i}", labels={"app": "web"})
    policy.create_namespaced_pod_disruption_budget("default", pdb_body("web", {"app": "web"}, minAvailable=2))  # type: ignore[arg-type]

    def budget() -> client.V1PodDisruptionBudgetStatus:
        st = policy.read_namespaced_pod_disruption_budget("web", "default").status
        assert st is not None
        return st

    st = budget()
    assert (st.current_healthy, st.desired_healthy, st.disruptions_allowed, st.expected_pods) == (3, 2, 1, 3)

    def evict(name: str, **query: Any) -> Any:
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace="default"))
        return core.create_namespaced_pod_eviction(name, "default", body, _preload_content=False, **query)

    assert evict("web-0", dry_run="All").status == 201  # a dry run evicts nothing and keeps the budget
    meta = core.read_namespaced_pod("web-0", "default").metadata
    assert meta is not None and meta.deletion_timestamp is None
    assert budget().disruptions_allowed == 1
    assert evict("web-0").status == 201
    st = budget()
    assert st.disruptions_allowed == 0 and st.current_healthy == 2
    with pytest.raises(ApiException) as err:
        evict("web-1")
    code, body = error_status(err)
    assert (
        code == 429 and "needs 2 healthy pods and has 2 currently" in body["details"]["causes"][0]["message"]
    )
    # an unready pod may go while the budget is met (IfHealthyBudget); a Pending one skips PDBs
    core.patch_namespaced_pod_status(
        "web-2", "default", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    with pytest.raises(ApiException):  # now 1 healthy < 2 desired: the unready pod counts against it
        evict("web-2")
    core.create_namespaced_pod("default", pod("new", app="web"))  # type: ignore[arg-type]
    assert evict("new").status == 201
    # a second matching PDB is an error; a PDB whose status lags its generation is a 429 with Retry-After
    policy.create_namespaced_pod_disruption_budget(
        "default",
        pdb_body("twin", {"app": "web"}, maxUnavailable=1),  # type: ignore[arg-type]
    )
    with pytest.raises(ApiException) as err:
        evict("web-1")
    assert err.value.status == 500
    policy.delete_namespaced_pod_disruption_budget("twin", "default")
    api_server.disruption.pause()
    policy.patch_namespaced_pod_disruption_budget("web", "default", {"spec": {"minAvailable": 1}})
    with pytest.raises(ApiException) as err:
        evict("web-1")
    assert err.value.status == 429
    assert err.value.headers is not None and err.value.headers["Retry-After"] == "10"
    api_server.disruption.resume()
    core.patch_namespaced_pod_status(
        "web-2", "default", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert evict("web-1").status == 201  # 2 healthy, 1 needed


def test_5_graceful_deletion_and_finalizers(api_server: APIServer) -> None:
    """``rest.BeforeDelete`` and the generic store's ``Delete``/``markAsDeleting``/
    ``ShouldDeleteDuringUpdate`` (``apiserver/pkg/registry``), with ``CheckGracefulDelete``
    (``pkg/registry/core/pod/strategy.go``): a pod on a node terminates (MODIFIED) until the kubelet's
    grace-0 delete; an unscheduled pod goes at once; finalizers hold any object."""
    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("on-node"))
    core.create_namespaced_pod("default", pod("unscheduled", node=""))
    watcher, _ = api_server.store.watch("pods", resource_version=str(api_server.store.resource_version))
    try:
        core.delete_namespaced_pod("on-node", "default")
        core.delete_namespaced_pod("unscheduled", "default")
        terminating = core.read_namespaced_pod("on-node", "default").metadata
        assert terminating.deletion_grace_period_seconds == 30 and terminating.deletion_timestamp is not None
        assert api_server.kubelet.confirm("default", "on-node")
        events = [watcher.next(1.0) for _ in range(5)]
    finally:
        watcher.close()
    assert [(e[0], e[1]["metadata"]["name"]) for e in events if e] == [
        ("MODIFIED", "on-node"),
        ("MODIFIED", "unscheduled"),
        ("DELETED", "unscheduled"),
        ("MODIFIED", "on-node"),
        ("DELETED", "on-node"),
    ]
    core.create_namespaced_config_map("default", {"metadata": {"name": "held", "finalizers": ["x.io/keep"]}})
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as err:  # no new finalizers once deletion started
        core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": ["x.io/more"]}})
    assert err.value.status == 422
    core.patch_namespaced_config_map(
        "held", "default", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x.io/keep"]}}
    )
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []
