"""The test API server against kube-apiserver's behaviour, one test per divergence found (6-10:
validation, create defaults, paging/history/bookmarks, the core and events APIs' one store, RBAC from the
shipped manifests; 1-5 in ``test_kube_fidelity``).

Each test names the upstream code it mirrors (kubernetes/kubernetes unless said otherwise) and drives the
server through the official client, as the components under test do.
"""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.apiserver.manifests import CRD_DIR
from tests.unit.apiserver.helpers import api_client, clients, error_status, new_watch, pod

DEPLOY = CRD_DIR.parent


def test_6_validation_the_real_server_does(api_server: APIServer) -> None:
    """``MicroTime.UnmarshalJSON`` (apimachinery ``meta/v1/micro_time.go``: RFC 3339 with six digits),
    ``ValidateLeaseSpec`` (``pkg/apis/coordination/validation``), the generic store's Update (no
    unconditional update for Leases, uid precondition), NamespaceLifecycle admission
    (``apiserver/pkg/admission/plugin/namespace/lifecycle``) and ``dryRun`` (``endpoints/handlers``)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = api_client(api_server)
    coord, core = client.CoordinationV1Api(api), client.CoreV1Api(api)

    def lease(name: str, when: datetime.datetime, duration: int = 15) -> Any:
        spec = client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=duration, renew_time=when)
        return client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=spec)

    whole = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)  # the client writes it without fractions
    with pytest.raises(ApiException) as err:
        coord.create_namespaced_lease("default", lease("l", whole))
    assert err.value.status == 400 and "MicroTime" in error_status(err)[1]["message"]
    with pytest.raises(ApiException) as err:
        coord.create_namespaced_lease("default", lease("l", whole.replace(microsecond=1), duration=0))
    assert err.value.status == 422
    created = coord.create_namespaced_lease("default", lease("l", whole.replace(microsecond=1)))
    unconditional = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}}
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease("l", "default", unconditional)  # type: ignore[arg-type]
    assert err.value.status == 422
    assert created.metadata is not None
    forged = {
        "metadata": {"name": "l", "uid": "not-it", "resourceVersion": created.metadata.resource_version}
    }
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease("l", "default", forged)  # type: ignore[arg-type]
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "c"}})  # type: ignore[arg-type]
    assert err.value.status == 404 and error_status(err)[1]["message"] == 'namespaces "nowhere" not found'
    rv = api_server.store.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "dry"}}, dry_run="All")  # type: ignore[arg-type]
    coord.patch_namespaced_lease("l", "default", {"spec": {"holderIdentity": "c"}}, dry_run="All")
    coord.delete_namespaced_lease("l", "default", dry_run="All")
    assert api_server.store.resource_version == rv
    spec = coord.read_namespaced_lease("l", "default").spec
    assert spec is not None and spec.holder_identity == "a"


def test_7_create_defaults(api_server: APIServer) -> None:
    """``PrepareForCreate`` of pods (``pkg/registry/core/pod/strategy.go``: phase Pending, ``qos.GetPodQOS``),
    ``pkg/apis/core/v1/defaults.go`` (schedulerName, grace period, requests from limits), Priority
    admission (``plugin/pkg/admission/priority``), and nodes keeping the status they register with
    (``pkg/registry/core/node/strategy.go``, ``SetDefaults_NodeStatus``)."""
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    body = pod("g")
    body["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    body["spec"]["priorityClassName"] = "system-node-critical"
    got = core.create_namespaced_pod("default", body)
    assert (got.status.phase, got.status.qos_class) == ("Pending", "Guaranteed")
    assert got.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert (got.spec.scheduler_name, got.spec.termination_grace_period_seconds) == ("default-scheduler", 30)
    assert got.spec.priority == 2000001000
    assert core.create_namespaced_pod("default", pod("be")).spec.priority == 0
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(
            "default", {**pod("x"), "spec": {**pod("x")["spec"], "priorityClassName": "koord-batch"}}
        )
    assert err.value.status == 403
    node: dict[str, Any] = {
        "metadata": {"name": "n1"},
        "status": {"capacity": {"cpu": "4", "kubernetes.io/batch-cpu": "2000"}},
    }
    created = core.create_node(node)
    assert created.status.capacity == node["status"]["capacity"] == created.status.allocatable


def test_8_paging_history_and_bookmarks(api_server_factory: Any) -> None:
    """etcd3 ``GetList`` paging (``apiserver/pkg/storage/etcd3/store.go``: continue tokens read at the
    first page's revision, 410 once compacted), per-resource watch caches (``storage/cacher``), and
    ``cacheWatcher.nextBookmarkTime`` (a bookmark 2 s before the watch's timeout)."""
    from kubernetes.client.exceptions import ApiException

    server = api_server_factory(history_limit=5)
    core, _ = clients(server)
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
    first = core.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == [
        "cm-0",
        "cm-1",
    ] and first.metadata.remaining_item_count == 3
    core.delete_namespaced_config_map("cm-3", "default")
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm-5"}})
    rest = core.list_namespaced_config_map("default", limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["cm-2", "cm-3", "cm-4"]  # as of the first page
    assert rest.metadata.resource_version == first.metadata.resource_version
    quiet_rv = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(10):  # churn on pods expires neither the ConfigMaps' window nor their continue token
        server.store.create("pods", pod(f"p{i}"))
    names = [
        e["object"].metadata.name
        for e in new_watch().stream(
            core.list_namespaced_config_map, "default", resource_version=quiet_rv, timeout_seconds=1
        )
    ]
    assert names == []
    for i in range(6):  # ConfigMap churn does
        core.patch_namespaced_config_map("cm-0", "default", {"data": {"i": str(i)}})
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("default", limit=10, _continue=first.metadata._continue)
    assert err.value.status == 410 and error_status(err)[1]["reason"] == "Expired"
    started = time.monotonic()
    kinds = [
        (e["type"], time.monotonic() - started)
        for e in new_watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=str(server.store.resource_version),
            allow_watch_bookmarks=True,
            timeout_seconds=3,
        )
    ]
    assert [k for k, _ in kinds] == ["BOOKMARK"] and 0.5 < kinds[0][1] < 2.5


def test_9_core_and_events_api_share_one_store(api_server: APIServer) -> None:
    """``pkg/apis/events/v1/conversion.go``: an Event is one object seen through ``v1`` and
    ``events.k8s.io/v1`` (regarding/involvedObject, note/message, reportingController/Component)."""
    from kubernetes import client

    api = api_client(api_server)
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    new = {
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000001Z",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "evicted",
        "reportingController": "koordlet",
        "reportingInstance": "koordlet-n1",
        "action": "Evict",
        "reason": "Evicted",
        "type": "Warning",
    }
    events.create_namespaced_event("default", new)  # type: ignore[arg-type]
    seen = core.read_namespaced_event("e1", "default")
    assert (seen.involved_object.name, seen.message, seen.reporting_component) == ("p", "evicted", "koordlet")
    core.patch_namespaced_event("e1", "default", {"message": "evicted twice"})
    assert events.read_namespaced_event("e1", "default").note == "evicted twice"
    # (unread, as _preload_content=False returns it: the annotation names the decoded type only)
    raw = json.loads(events.list_namespaced_event("default", _preload_content=False).data)  # type: ignore[attr-defined]
    assert raw["apiVersion"] == "events.k8s.io/v1" and [e["metadata"]["name"] for e in raw["items"]] == ["e1"]
    got = json.loads(events.read_namespaced_event("e1", "default", _preload_content=False).data)  # type: ignore[attr-defined]
    assert (got["apiVersion"], got["kind"], got["note"]) == ("events.k8s.io/v1", "Event", "evicted twice")


def test_10_rbac_from_the_shipped_manifests(api_server_factory: Any) -> None:
    """``plugin/pkg/auth/authorizer/rbac/rbac.go`` (``RBACAuthorizer.Authorize``) and
    ``pkg/apis/rbac/v1/evaluation_helpers.go`` (``RuleAllows``): with authorization on, the koordlet
    ServiceAccount of ``deploy/daemonset`` may list pods, not read ConfigMaps nor delete pods; the 403
    names user, verb and scope. (TokenReview/SubjectAccessReview: ``test_authz.py``.)"""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    secured = api_server_factory(authorization=True)
    secured.apply(DEPLOY / "koordlet.yaml", DEPLOY / "rbac.yaml")
    admin = client.CoreV1Api(client.ApiClient(secured.client_config()))
    agent = client.CoreV1Api(client.ApiClient(secured.client_config("koordinator-system/koordlet")))
    admin.create_namespaced_config_map("default", {"metadata": {"name": "c"}})  # type: ignore[arg-type]
    assert agent.list_pod_for_all_namespaces().items == []
    with pytest.raises(ApiException) as err:
        agent.list_namespaced_config_map("default")
    assert err.value.status == 403 and err.value.body is not None
    assert json.loads(err.value.body)["message"] == (
        'configmaps is forbidden: User "system:serviceaccount:koordinator-system:koordlet" cannot list '
        'resource "configmaps" in API group "" in the namespace "default"'
    )
    with pytest.raises(ApiException) as err:
        agent.delete_namespaced_pod("p", "default")  # the role has pods/eviction, not delete
    assert err.value.status == 403
