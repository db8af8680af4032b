"""The pods/eviction subresource (policy/v1) with the official client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.unit.apiserver.helpers import clients, pod


def _eviction(name: str, uid: str | None = None) -> Any:
    from kubernetes import client

    opts = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)) if uid else None
    return client.V1Eviction(
        api_version="policy/v1",
        kind="Eviction",
        metadata=client.V1ObjectMeta(name=name, namespace="default"),
        delete_options=opts,
    )


def test_eviction_with_the_right_uid_deletes_the_pod(api_server: APIServer) -> None:
    core, _ = clients(api_server)
    uid = core.create_namespaced_pod("default", pod("be-1")).metadata.uid
    core.create_namespaced_pod_eviction("be-1", "default", _eviction("be-1", uid))
    # the pod is on a node: it terminates until that node's kubelet confirms
    (terminating,) = core.list_namespaced_pod("default").items
    assert terminating.metadata.deletion_timestamp is not None
    assert api_server.kubelet.confirm_all() == ["default/be-1"]
    assert core.list_namespaced_pod("default").items == []
    (req,) = [r for r in api_server.requests if r.path.endswith("/eviction")]
    assert req.status == 201 and req.body["apiVersion"] == "policy/v1"
    assert "Content-Type" not in req.headers  # the client sends none on POST; the server must not need it


def test_eviction_with_a_wrong_uid_is_409_and_keeps_the_pod(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("be-1"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("be-1", "default", _eviction("be-1", "not-the-uid"))
    assert err.value.status == 409
    assert "the UID in the precondition (not-the-uid)" in json.loads(str(err.value.body))["message"]
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["be-1"]


def test_eviction_blocked_answers_429_until_released(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("be-1"))
    api_server.evictions_answer_429(True)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("be-1", "default", _eviction("be-1"))
    body = json.loads(str(err.value.body))
    assert (err.value.status, body["reason"]) == (429, "TooManyRequests")
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert len(core.list_namespaced_pod("default").items) == 1
    api_server.evictions_answer_429(False)
    core.create_namespaced_pod_eviction("be-1", "default", _eviction("be-1"))
    assert core.read_namespaced_pod("be-1", "default").metadata.deletion_timestamp is not None


def test_eviction_of_a_missing_pod_is_404(api_server: APIServer) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _ = clients(api_server)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("ghost", "default", _eviction("ghost"))
    assert err.value.status == 404


def test_eviction_emits_a_deleted_watch_event(api_server: APIServer) -> None:
    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("be-1"))
    watcher, _ = api_server.store.watch("pods", resource_version=str(api_server.store.resource_version))
    try:
        core.create_namespaced_pod_eviction("be-1", "default", _eviction("be-1"))
        api_server.kubelet.confirm("default", "be-1")
        events = [watcher.next(2.0) for _ in range(3)]
    finally:
        watcher.close()
    assert [(e[0], e[1]["metadata"]["name"]) for e in events if e] == [
        ("MODIFIED", "be-1"),  # deletionTimestamp set, grace period 30 s
        ("MODIFIED", "be-1"),  # the kubelet's delete with grace period 0
        ("DELETED", "be-1"),
    ]
