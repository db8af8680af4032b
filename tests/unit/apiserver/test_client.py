"""The official ``kubernetes`` client against the test API server: CRUD, status, patches, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.unit.apiserver.helpers import GROUP, VERSION, clients, nodemetric, pod


@pytest.fixture
def k8s() -> Any:
    from kubernetes import client

    return client


def test_nodemetric_create_get_list_and_status_only_patch(api_server: APIServer) -> None:
    _, co = clients(api_server)
    created = co.create_cluster_custom_object(
        GROUP, VERSION, "nodemetrics", nodemetric(updateTime="2026-01-01T00:00:00Z")
    )
    # create answers 201 (the client maps only 201 for this call), and drops .status: status subresource.
    assert created is not None
    assert "status" not in created
    meta = created["metadata"]
    assert meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"].endswith("Z")

    usage = {"resources": {"cpu": "1500m", "memory": "2Gi"}}
    patched = co.patch_cluster_custom_object_status(
        GROUP,
        VERSION,
        "nodemetrics",
        "node-a",
        {
            "status": {"nodeMetric": {"nodeUsage": usage}},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 1}},
        },
    )
    assert patched["status"]["nodeMetric"]["nodeUsage"] == usage
    # /status writes touch only .status: the spec change in the same patch is ignored, generation kept.
    assert patched["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 60
    assert patched["metadata"]["generation"] == 1
    assert int(patched["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])

    # a main-resource write ignores .status but bumps generation for a spec change
    main = co.patch_cluster_custom_object(
        GROUP,
        VERSION,
        "nodemetrics",
        "node-a",
        {"status": {"nodeMetric": None}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}}},
    )
    assert main["status"]["nodeMetric"]["nodeUsage"] == usage
    assert main["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30
    assert main["metadata"]["generation"] == 2

    got = co.get_cluster_custom_object(GROUP, VERSION, "nodemetrics", "node-a")
    assert got == main
    listed = co.list_cluster_custom_object(GROUP, VERSION, "nodemetrics")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["node-a"]
    assert listed["metadata"]["resourceVersion"] == main["metadata"]["resourceVersion"]
    assert api_server.store.get("nodemetrics", "node-a")["status"]["nodeMetric"]["nodeUsage"] == usage


def test_invalid_nodemetric_status_is_422(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    _, co = clients(api_server)
    co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", nodemetric())
    bad = {"status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "one and a half"}}}}}
    with pytest.raises(ApiException) as err:
        co.patch_cluster_custom_object_status(GROUP, VERSION, "nodemetrics", "node-a", bad)
    assert err.value.status == 422
    assert "status.nodeMetric.nodeUsage.resources.cpu" in str(err.value.body)
    assert "status" not in api_server.store.get("nodemetrics", "node-a")
    with pytest.raises(ApiException) as err:
        co.create_cluster_custom_object(
            GROUP,
            VERSION,
            "nodemetrics",
            {**nodemetric("node-b"), "spec": {"metricCollectPolicy": {"reportIntervalSeconds": "x"}}},
        )
    assert err.value.status == 422


def test_unknown_fields_pruned_or_refused_with_strict_validation(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    _, co = clients(api_server)
    obj = nodemetric()
    obj["spec"]["typo"] = 1
    created = co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", obj)
    assert "typo" not in created["spec"]
    obj["metadata"]["name"] = "node-b"
    with pytest.raises(ApiException) as err:
        co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", obj, field_validation="Strict")
    assert err.value.status == 400 and "typo" in str(err.value.body)


def test_list_pods_with_field_selector_returns_only_that_nodes_pods(api_server: APIServer) -> None:
    core, _ = clients(api_server)
    for name, node, ns in (
        ("p1", "node-a", "default"),
        ("p2", "node-b", "default"),
        ("p3", "node-a", "kube-system"),
    ):
        core.create_namespaced_pod(ns, pod(name, node, ns))
    on_a = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-a")
    assert sorted(p.metadata.name for p in on_a.items) == ["p1", "p3"]
    not_a = core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=node-a")
    assert [p.metadata.name for p in not_a.items] == ["p2"]
    in_default = core.list_namespaced_pod("default", field_selector="spec.nodeName==node-a")
    assert [p.metadata.name for p in in_default.items] == ["p1"]
    by_name = core.list_pod_for_all_namespaces(
        field_selector="metadata.name=p3,metadata.namespace=kube-system"
    )
    assert [p.metadata.name for p in by_name.items] == ["p3"]
    assert int(on_a.metadata.resource_version) == api_server.store.resource_version


def test_label_selectors(api_server: APIServer) -> None:
    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("a", app="web", tier="fe"))
    core.create_namespaced_pod("default", pod("b", app="db"))
    core.create_namespaced_pod("default", pod("c"))

    def names(selector: str) -> list[str]:
        return sorted(
            p.metadata.name for p in core.list_namespaced_pod("default", label_selector=selector).items
        )

    assert names("app=web") == ["a"]
    assert names("app!=web") == ["b", "c"]
    assert names("app in (web,db)") == ["a", "b"]
    assert names("app notin (web)") == ["b", "c"]
    assert names("app") == ["a", "b"]
    assert names("!app") == ["c"]
    assert names("app=web,tier=fe") == ["a"]


def test_unsupported_field_selector_is_400(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(field_selector="spec.priority=3")
    assert err.value.status == 400 and "field label not supported" in str(err.value.body)


def test_not_found_and_already_exists_have_status_bodies(api_server: APIServer) -> None:
    import json

    from kubernetes.client.exceptions import ApiException

    core, co = clients(api_server)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("nope", "default")
    body = json.loads(str(err.value.body))
    assert (err.value.status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
    assert body["message"] == 'pods "nope" not found'
    co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", nodemetric())
    with pytest.raises(ApiException) as err:
        co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", nodemetric())
    body = json.loads(str(err.value.body))
    assert (err.value.status, body["reason"]) == (409, "AlreadyExists")
    assert body["details"] == {"name": "node-a", "group": GROUP, "kind": "nodemetrics"}


def test_stale_put_is_409_and_fresh_put_succeeds(api_server: APIServer, k8s: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    core, co = clients(api_server)
    first = core.create_namespaced_pod("default", pod("p1"))
    first.metadata.labels = {"v": "1"}
    second = core.replace_namespaced_pod("p1", "default", first)
    assert second.metadata.labels == {"v": "1"}
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    first.metadata.labels = {"v": "stale"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod("p1", "default", first)  # still carries the first resourceVersion
    assert err.value.status == 409 and "the object has been modified" in str(err.value.body)
    assert api_server.store.get("pods", "p1", "default")["metadata"]["labels"] == {"v": "1"}

    nm = co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", nodemetric())
    nm["status"] = {"updateTime": "2026-01-01T00:00:00Z"}
    updated = co.replace_cluster_custom_object_status(GROUP, VERSION, "nodemetrics", "node-a", nm)
    assert updated["status"] == {"updateTime": "2026-01-01T00:00:00Z"}
    with pytest.raises(ApiException) as err:
        co.replace_cluster_custom_object_status(GROUP, VERSION, "nodemetrics", "node-a", nm)
    assert err.value.status == 409
    del nm["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:  # custom resources refuse unconditional updates
        co.replace_cluster_custom_object(GROUP, VERSION, "nodemetrics", "node-a", nm)
    assert err.value.status == 422


def test_json_patch_and_merge_patch(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, co = clients(api_server)
    core.create_namespaced_pod("default", pod("p1", app="web", keep="yes"))
    merged = core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"app": None, "new": "x"}}})
    assert merged.metadata.labels == {"keep": "yes", "new": "x"}
    ops = [
        {"op": "replace", "path": "/metadata/labels/keep", "value": "no"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
    ]
    patched = core.patch_namespaced_pod("p1", "default", ops)
    assert patched.metadata.labels["keep"] == "no" and patched.metadata.annotations == {"a": "b"}
    assert [r.headers.get("Content-Type") for r in api_server.requests if r.method == "PATCH"] == [
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ]
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(
            "p1", "default", [{"op": "test", "path": "/metadata/labels/keep", "value": "yes"}]
        )
    assert err.value.status == 422

    co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", nodemetric())
    out = co.patch_cluster_custom_object_status(
        GROUP,
        VERSION,
        "nodemetrics",
        "node-a",
        [{"op": "add", "path": "/status", "value": {"updateTime": "2026-01-01T00:00:00Z"}}],
        _content_type="application/json-patch+json",
    )
    assert out["status"] == {"updateTime": "2026-01-01T00:00:00Z"}


def test_patch_with_stale_resource_version_is_409(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    p = core.create_namespaced_pod("default", pod("p1"))
    core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"a": "1"}}})
    stale = {"metadata": {"resourceVersion": p.metadata.resource_version, "labels": {"a": "2"}}}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p1", "default", stale)
    assert err.value.status == 409


def test_delete_and_no_op_writes(api_server: APIServer) -> None:
    core, _ = clients(api_server)
    p = core.create_namespaced_pod("default", pod("p1"))
    rv = api_server.store.resource_version
    same = core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {}}})
    assert same.metadata.resource_version == p.metadata.resource_version
    assert api_server.store.resource_version == rv
    gone = core.delete_namespaced_pod("p1", "default", grace_period_seconds=0)
    assert gone.metadata.name == "p1"
    assert core.list_namespaced_pod("default").items == []


def test_events_both_groups(api_server: APIServer, k8s: Any) -> None:
    core, _ = clients(api_server)
    ev = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(generate_name="p1."),
        involved_object=k8s.V1ObjectReference(kind="Pod", name="p1", namespace="default"),
        reason="Evicted",
        message="BE pod evicted",
        type="Warning",
    )
    created = core.create_namespaced_event("default", ev)
    assert created.metadata.name.startswith("p1.") and created.reason == "Evicted"
    found = core.list_namespaced_event("default", field_selector="involvedObject.name=p1,reason=Evicted")
    assert [e.metadata.name for e in found.items] == [created.metadata.name]
    events = k8s.EventsV1Api(k8s.ApiClient(api_server.client_config()))
    new = {
        "metadata": {"name": "e1"},
        # not a whole second: the client writes those without the six digits a MicroTime needs
        "eventTime": "2026-01-01T00:00:00.000001Z",
        "reportingController": "koordlet",
        "reportingInstance": "koordlet-node-a",
        "action": "Test",
        "reason": "X",
        "type": "Normal",
    }
    assert events.create_namespaced_event("default", new).reason == "X"
    # one store: the core event shows through events.k8s.io/v1 too (raw: it has no eventTime, which the
    # client's EventsV1Event model cannot parse, as against a real server)
    listed = json.loads(events.list_event_for_all_namespaces(_preload_content=False).data)["items"]
    assert sorted(e["metadata"]["name"] for e in listed) == sorted(["e1", created.metadata.name])


def test_discovery_and_version(api_server: APIServer, k8s: Any) -> None:
    api = k8s.ApiClient(api_server.client_config())
    assert k8s.VersionApi(api).get_code().major == "1"
    assert "v1" in k8s.CoreApi(api).get_api_versions().versions
    groups = {g.name for g in k8s.ApisApi(api).get_api_versions().groups}
    assert {GROUP, "events.k8s.io"} <= groups
    core_resources = {r.name for r in k8s.CoreV1Api(api).get_api_resources().resources}
    assert {"pods", "pods/status", "pods/eviction", "nodes", "events", "namespaces"} <= core_resources
    slo = k8s.CustomObjectsApi(api).get_api_resources(GROUP, VERSION)
    assert {(r.name, r.namespaced) for r in slo.resources} >= {("nodemetrics", False), ("nodeslos", False)}


def test_nodes_and_namespaces(api_server: APIServer, k8s: Any) -> None:
    core, _ = clients(api_server)
    core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name="node-a", labels={"zone": "a"})))
    core.patch_node_status("node-a", {"status": {"allocatable": {"cpu": "2"}}})
    node = core.read_node("node-a")
    assert node.status.allocatable == {"cpu": "2"}
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="team")))
    names = [n.metadata.name for n in core.list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system", "team"]


def test_fail_next_injects_statuses(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    api_server.fail_next(1, 500)
    api_server.fail_next(1, 429, method="POST")
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("default")
    assert err.value.status == 500
    core.list_namespaced_pod("default")  # the 429 waits for a POST
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("p1"))
    assert err.value.status == 429
    core.create_namespaced_pod("default", pod("p1"))
    api_server.fail_next(2, 409, path_contains="/pods/p1")
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.read_namespaced_pod("p1", "default")
        assert err.value.status == 409
    assert core.read_namespaced_pod("p1", "default").metadata.name == "p1"
    assert [r.status for r in api_server.requests] == [500, 200, 429, 201, 409, 409, 200]
