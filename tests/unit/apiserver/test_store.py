"""The store alone (no HTTP): revisions, generation, status rules, preconditions, history."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.apiserver import Store
from tests.apiserver.fixtures import NODEMETRIC_CRD
from tests.apiserver.resources import Registry
from tests.apiserver.status import APIError
from tests.unit.apiserver.helpers import nodemetric, pod


@pytest.fixture
def store() -> Store:
    registry = Registry()
    registry.add_crd(NODEMETRIC_CRD)
    return Store(registry, history_limit=4, clock=lambda: 1767225600.0)


def test_every_write_takes_the_next_global_revision(store: Store) -> None:
    a = store.create("pods", pod("a"))
    n = store.create("nodemetrics", nodemetric())
    b = store.update("pods", {**a, "metadata": {**a["metadata"], "labels": {"x": "1"}}})
    d = store.delete("nodemetrics", "node-a")
    assert [int(o["metadata"]["resourceVersion"]) for o in (a, n, b, d)] == [1, 2, 3, 4]
    assert store.resource_version == 4
    assert a["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert a["metadata"]["uid"] != n["metadata"]["uid"]


def test_concurrent_writes_get_unique_revisions(store: Store) -> None:
    got: list[int] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for j in range(20):
            obj = store.create("pods", pod(f"p{i}-{j}"))
            with lock:
                got.append(int(obj["metadata"]["resourceVersion"]))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 81))


def test_generation_counts_spec_changes_only(store: Store) -> None:
    store.create("nodemetrics", nodemetric())

    def current() -> dict[str, Any]:
        return store.get("nodemetrics", "node-a")

    labelled = current()
    labelled["metadata"]["labels"] = {"a": "b"}
    assert store.update("nodemetrics", labelled)["metadata"]["generation"] == 1
    with_status = {**current(), "status": {"updateTime": "2026-01-01T00:00:00Z"}}
    out = store.update("nodemetrics", with_status, subresource="status")
    assert out["metadata"]["generation"] == 1 and out["status"] == with_status["status"]
    respec = current()
    respec["spec"] = {"metricCollectPolicy": {"reportIntervalSeconds": 5}}
    respec["status"] = {"updateTime": "1999-01-01T00:00:00Z"}
    out = store.update("nodemetrics", respec)
    assert out["metadata"]["generation"] == 2
    assert out["status"] == with_status["status"]  # main writes keep the stored status


def test_server_owned_metadata_cannot_be_overwritten(store: Store) -> None:
    created = store.create("pods", pod("a"))
    forged = {**created, "metadata": {**created["metadata"], "creationTimestamp": "2000-01-01T00:00:00Z"}}
    forged["metadata"]["labels"] = {"changed": "yes"}
    out = store.update("pods", forged)
    assert out["metadata"]["uid"] == created["metadata"]["uid"]
    assert out["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    # a uid that is not the object's is a precondition that fails (the generic store's Update)
    with pytest.raises(APIError) as err:
        store.update("pods", {**out, "metadata": {**out["metadata"], "uid": "forged"}})
    assert err.value.code == 409 and "UID in precondition: forged" in err.value.message


def test_identical_update_writes_nothing(store: Store) -> None:
    created = store.create("pods", pod("a"))
    again = store.update("pods", created)
    assert again == created and store.resource_version == 1


def test_stale_update_and_delete_preconditions(store: Store) -> None:
    created = store.create("pods", pod("a"))
    store.update("pods", {**created, "metadata": {**created["metadata"], "labels": {"v": "2"}}})
    with pytest.raises(APIError) as err:
        store.update("pods", created)
    assert err.value.code == 409 and err.value.reason == "Conflict"
    with pytest.raises(APIError) as err:
        store.delete("pods", "a", "default", uid="other")
    assert err.value.code == 409
    with pytest.raises(APIError) as err:
        store.delete("pods", "a", "default", resource_version="1")
    assert err.value.code == 409
    store.delete("pods", "a", "default", uid=created["metadata"]["uid"], grace_period_seconds=0)
    with pytest.raises(APIError) as err:
        store.get("pods", "a", "default")
    assert err.value.code == 404


def test_schema_violations_are_422_and_nothing_is_written(store: Store) -> None:
    bad = nodemetric()
    bad["spec"]["metricCollectPolicy"]["nodeMemoryCollectPolicy"] = "everything"
    with pytest.raises(APIError) as err:
        store.create("nodemetrics", bad)
    assert err.value.code == 422
    assert err.value.details is not None
    assert err.value.details["causes"][0]["field"] == "spec.metricCollectPolicy.nodeMemoryCollectPolicy"
    assert store.resource_version == 0


def test_generate_name_and_namespace_rules(store: Store) -> None:
    made = store.create("pods", {"metadata": {"generateName": "web-"}, "spec": pod("x")["spec"]}, "ns1")
    assert made["metadata"]["name"].startswith("web-") and len(made["metadata"]["name"]) == 9
    assert made["metadata"]["namespace"] == "ns1" and made["kind"] == "Pod"
    with pytest.raises(APIError) as err:
        store.create("pods", pod("x", namespace="ns1"), "ns2")
    assert err.value.code == 400
    with pytest.raises(APIError) as err:
        store.create("pods", {"metadata": {}})
    assert err.value.code == 422
    cluster = store.create("nodemetrics", {**nodemetric(), "metadata": {"name": "n", "namespace": "ignored"}})
    assert "namespace" not in cluster["metadata"]


def test_history_bound_and_replay(store: Store) -> None:
    for i in range(6):
        store.create("pods", pod(f"p{i}"))
    # history keeps revisions 3..6: resuming from 2 works, from 1 is 410 Gone
    watcher, initial = store.watch("pods", resource_version="2")
    try:
        assert initial == []
        names = [ev[1]["metadata"]["name"] for ev in iter(lambda: watcher.next(0.05), None)]
        assert names == ["p2", "p3", "p4", "p5"]
    finally:
        watcher.close()
    with pytest.raises(APIError) as err:
        store.watch("pods", resource_version="1")
    assert (err.value.code, err.value.message) == (410, "too old resource version: 1 (2)")


def test_watch_filters_namespace_and_resource(store: Store) -> None:
    watcher, _ = store.watch("pods", "default", resource_version="0")
    try:
        store.create("pods", pod("other", namespace="kube-system"))
        store.create("nodemetrics", nodemetric())
        store.create("pods", pod("mine"))
        event = watcher.next(1.0)
        assert event is not None and event[1]["metadata"]["name"] == "mine"
        assert watcher.next(0.05) is None
        assert watcher.last_rv == 3
    finally:
        watcher.close()


def test_resolve_and_unknown_resources(store: Store) -> None:
    assert store.resolve("nodemetrics").group == "slo.koordinator.sh"
    assert store.resolve("events.events.k8s.io").group == "events.k8s.io"
    assert store.resolve("events").group == ""
    with pytest.raises(KeyError):
        store.resolve("widgets")


def test_create_with_a_resource_version_is_refused_like_etcd3(store: Store) -> None:
    created = store.create("pods", pod("a"))
    copy_of = {**created, "metadata": {**created["metadata"], "name": "b"}}
    with pytest.raises(APIError) as err:
        store.create("pods", copy_of)
    assert err.value.code == 500 and "resourceVersion should not be set" in err.value.message


def test_a_write_of_only_unknown_fields_changes_nothing(store: Store) -> None:
    created = store.create("nodemetrics", nodemetric())
    noisy = {**created, "spec": {**created["spec"], "unknownField": 1}}
    assert store.update("nodemetrics", noisy) == created
    assert store.resource_version == 1
