"""Watch semantics with the official client: replay from a resourceVersion, timeouts, 410, bookmarks."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.apiserver import APIServer, Request
from tests.unit.apiserver.helpers import GROUP, VERSION, clients, new_watch, nodemetric, pod


def test_watch_from_resource_version_gets_later_events_and_ends_by_itself(api_server: APIServer) -> None:

    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("before"))
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    core.create_namespaced_pod("default", pod("p1"))
    core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("p1", "default", grace_period_seconds=0)
    core.create_namespaced_pod("default", pod("other-node", node="node-b"))

    started = time.monotonic()
    seen = [
        (ev["type"], ev["object"].metadata.name, ev["object"].metadata.resource_version)
        for ev in new_watch().stream(
            core.list_pod_for_all_namespaces,
            field_selector="spec.nodeName=node-a",
            resource_version=rv,
            timeout_seconds=2,
        )
    ]
    took = time.monotonic() - started
    # a delete marks the pod deleting (MODIFIED) before it goes, even with grace period 0
    assert [(t, n) for t, n, _ in seen] == [
        ("ADDED", "p1"),
        ("MODIFIED", "p1"),
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
    ]
    versions = [int(v) for _, _, v in seen]
    assert versions == sorted(versions) and versions[0] > int(rv)
    assert 1.5 < took < 8, "the server must end the stream at timeoutSeconds"


def test_watch_receives_live_events(api_server: APIServer) -> None:

    core, _ = clients(api_server)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    got: list[tuple[str, str]] = []

    def consume() -> None:
        w = new_watch()
        for ev in w.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5):
            got.append((ev["type"], ev["object"].metadata.name))
            if len(got) == 3:
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    assert api_server.store.wait_for_watchers(1)
    api_server.store.create("pods", pod("live"))
    api_server.store.delete("pods", "live", "default", grace_period_seconds=0)
    t.join(10)
    assert not t.is_alive()
    assert got == [("ADDED", "live"), ("MODIFIED", "live"), ("DELETED", "live")]


def test_watch_without_version_starts_with_current_objects(api_server: APIServer) -> None:

    core, _ = clients(api_server)
    api_server.store.create("pods", pod("a"))
    api_server.store.create("pods", pod("b"))
    api_server.store.delete("pods", "a", "default", grace_period_seconds=0)
    events = [
        (e["type"], e["object"].metadata.name)
        for e in new_watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1)
    ]
    assert events == [("ADDED", "b")]


def test_expired_resource_version_is_410(api_server_factory: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    server = api_server_factory(history_limit=3)
    core, _ = clients(server)
    core.create_namespaced_pod("default", pod("first"))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    for i in range(5):
        core.create_namespaced_pod("default", pod(f"p{i}"))
    with pytest.raises(ApiException) as err:
        for _ in new_watch().stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1
        ):
            pass
    assert err.value.status == 410
    assert "too old resource version" in str(err.value.reason)
    # the newest kept window still resumes
    recent = str(server.store.resource_version - 2)
    names = [
        e["object"].metadata.name
        for e in new_watch().stream(
            core.list_namespaced_pod, "default", resource_version=recent, timeout_seconds=1
        )
    ]
    assert names == ["p3", "p4"]


def test_compaction_expires_every_older_version(api_server: APIServer) -> None:
    from tests.apiserver.status import APIError

    api_server.store.create("pods", pod("a"))
    api_server.store.create("pods", pod("b"))
    api_server.store.compact()
    with pytest.raises(APIError) as err:
        api_server.store.watch("pods", resource_version="1")
    assert err.value.code == 410
    watcher, initial = api_server.store.watch("pods", resource_version=str(api_server.store.resource_version))
    watcher.close()
    assert initial == []


def test_bookmarks_carry_the_current_version(api_server: APIServer) -> None:
    """The cacher's ``nextBookmarkTime`` (``storage/cacher/cache_watcher.go``): with the periodic bookmark
    a minute away, one still comes 2 s before the watch's timeout, carrying the newest version."""
    core, _ = clients(api_server)
    api_server.store.create("pods", pod("a"))
    api_server.store.create("pods", pod("elsewhere", namespace="kube-system"))
    w = new_watch()
    started = time.monotonic()
    seen = []
    for e in w.stream(
        core.list_namespaced_pod,
        "default",
        resource_version="1",
        allow_watch_bookmarks=True,
        timeout_seconds=3,
    ):
        seen.append((e["type"], round(time.monotonic() - started, 1)))
    types = [t for t, _ in seen]
    assert types == ["ADDED", "BOOKMARK"]
    assert 0.5 < seen[1][1] < 2.5, seen
    # the filtered-out write in another namespace still advances the bookmark's version
    assert w.resource_version == str(api_server.store.resource_version)


def test_a_bookmark_counts_writes_to_other_resources_made_before_the_watch(api_server: APIServer) -> None:
    """A client lists, another resource is written, then the watch opens from the list's version: no
    event of this resource follows, yet the bookmark must carry the newer version (the cacher's progress),
    or an informer stays at its list's version until its own resource changes."""
    core, _ = clients(api_server)
    api_server.store.create("pods", pod("a"))
    listed = core.list_namespaced_pod("default").metadata.resource_version
    api_server.store.create("nodes", {"metadata": {"name": "n1"}})
    w = new_watch()
    types = [
        e["type"]
        for e in w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=listed,
            allow_watch_bookmarks=True,
            timeout_seconds=3,
        )
    ]
    assert types == ["BOOKMARK"]
    assert int(w.resource_version) == api_server.store.resource_version > int(listed)


def test_custom_object_watch(api_server: APIServer) -> None:

    _, co = clients(api_server)
    co.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", nodemetric())
    co.patch_cluster_custom_object_status(
        GROUP, VERSION, "nodemetrics", "node-a", {"status": {"updateTime": "2026-01-01T00:00:00Z"}}
    )
    events = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in new_watch().stream(
            co.list_cluster_custom_object,
            GROUP,
            VERSION,
            "nodemetrics",
            resource_version="0",
            timeout_seconds=1,
        )
    ]
    assert events == [("ADDED", "node-a")]


def test_selector_transitions_become_added_and_deleted(api_server: APIServer) -> None:
    store = api_server.store
    store.create("pods", pod("p", app="web"))
    watcher, _ = store.watch("pods", label_selector="app=web", resource_version=str(store.resource_version))
    try:
        store.patch("pods", "p", {"metadata": {"labels": {"app": "db"}}}, namespace="default")
        store.patch("pods", "p", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
        store.patch("pods", "p", {"metadata": {"labels": {"app": "web"}}}, namespace="default")
        got = [watcher.next(1.0) for _ in range(2)]
        assert [(t, o["metadata"]["labels"]) for t, o in filter(None, got)] == [
            ("DELETED", {"app": "db"}),
            ("ADDED", {"app": "web", "x": "1"}),
        ]
        assert watcher.next(0.1) is None
    finally:
        watcher.close()


def test_shared_informer_tracks_pods(api_server: APIServer) -> None:
    informer_mod = pytest.importorskip("kubernetes.informer")
    core, _ = clients(api_server)
    core.create_namespaced_pod("default", pod("p1"))
    core.create_namespaced_pod("default", pod("p2"))
    core.create_namespaced_pod("default", pod("elsewhere", node="node-b"))
    seen: list[tuple[str, str]] = []
    changed = threading.Condition()

    def handler(kind: str) -> Any:
        def record(obj: Any) -> None:
            with changed:
                seen.append((kind, obj.metadata.name))
                changed.notify_all()

        return record

    inf = informer_mod.SharedInformer(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=node-a")
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        inf.add_event_handler(kind, handler(kind))
    inf.start()
    try:
        with changed:
            assert changed.wait_for(lambda: len(seen) >= 2, 5)
        assert server_has_watch(api_server)
        core.patch_namespaced_pod("p2", "default", {"metadata": {"labels": {"v": "2"}}})
        core.delete_namespaced_pod("p1", "default", grace_period_seconds=0)
        with changed:
            assert changed.wait_for(lambda: len(seen) >= 5, 5)
    finally:
        inf.stop()
    assert seen == [
        ("ADDED", "p1"),
        ("ADDED", "p2"),
        ("MODIFIED", "p2"),
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
    ]
    assert sorted(inf.cache.list_keys()) == ["default/p2"]


def test_watch_without_timeout_resumes_after_the_server_ends_the_stream(api_server_factory: Any) -> None:
    server = api_server_factory(default_watch_timeout=0.3)
    core, _ = clients(server)
    server.store.create("pods", pod("a"))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    w = new_watch()
    got: list[str] = []

    def is_watch(r: Request) -> bool:
        return r.query.get("watch") == "true"

    def feed() -> None:
        # only once the first stream has ended and the client has come back
        if len(server.wait_for_requests(is_watch, count=2)) >= 2:
            server.store.create("pods", pod("b"))

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        for ev in w.stream(core.list_namespaced_pod, "default", resource_version=rv):
            got.append(ev["object"].metadata.name)
            w.stop()
    finally:
        feeder.join(10)
    watches = [r for r in server.requests if is_watch(r)]
    assert got == ["b"]
    assert len(watches) >= 2, "the client reconnects when the server ends a watch"
    assert watches[1].query["resourceVersion"] == rv


def server_has_watch(server: APIServer) -> bool:
    return server.store.wait_for_watchers(1)
