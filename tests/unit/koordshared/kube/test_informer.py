"""The shared informer against the in-repo API server through the official client: list, watch, handlers,
indexes, selectors, bookmarks, resume after an outage without a re-list, re-list on 410, prompt close."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from koordlet.testing import wait_until
from koordshared.apis.meta import groups
from koordshared.kube.client import make_api_client
from koordshared.kube.informer import EventHandler, Informer, index_by_node, object_key
from koordshared.kube.informers import Watch, list_call
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def pod(name: str, node_name: str, ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x"}]},
    }


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []

    def handler(self) -> EventHandler:
        return EventHandler(
            on_add=lambda o: self._rec("add", o),
            on_update=lambda old, new: self._rec("update", new),
            on_delete=lambda o: self._rec("delete", o),
        )

    def _rec(self, what: str, obj: Any) -> None:
        with self.lock:
            self.events.append((what, object_key(obj)))

    def seen(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.events)


def wait(cond: Callable[[], object], timeout: float = 10.0) -> None:
    assert wait_until(cond, timeout), "condition not met in time"


@pytest.fixture
def running(api_server: APIServer) -> Iterator[Callable[..., Informer]]:  # noqa: F811
    """Start informers on ``api_server``; every one is closed and joined at the end."""
    from kubernetes import client

    api = make_api_client(client_configuration=api_server.client_config())
    core = client.CoreV1Api(api)
    stop = threading.Event()
    started: list[tuple[Informer, threading.Thread]] = []

    def start(kind: str = "nodes", recorder: Recorder | None = None, **opts: Any) -> Informer:
        fn = core.list_node if kind == "nodes" else core.list_pod_for_all_namespaces
        kwargs = opts.pop("kwargs", {})
        inf = Informer(kind, fn, kwargs, indexers={"node": index_by_node}, **opts)
        if recorder is not None:
            inf.add_handler(recorder.handler())
        t = threading.Thread(target=inf.run, args=(stop,), name=f"test-informer-{kind}")
        t.start()
        started.append((inf, t))
        return inf

    yield start
    stop.set()
    for inf, t in started:
        inf.close()
        t.join(5)
        assert not t.is_alive(), "informer did not stop"
    api.close()


def test_list_then_watch_feeds_cache_handlers_and_indexes(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    store = api_server.store
    for i in range(3):
        store.create("nodes", node(f"n{i}"))
    store.create("pods", pod("p0", "n0"))
    rec = Recorder()
    nodes = running("nodes", rec)
    pods = running("pods")
    wait(lambda: nodes.has_synced() and pods.has_synced())
    assert sorted(nodes.keys()) == ["n0", "n1", "n2"]
    assert sorted(rec.seen()) == [("add", "n0"), ("add", "n1"), ("add", "n2")]
    assert [object_key(p) for p in pods.by_index("node", "n0")] == ["default/p0"]

    store.create("nodes", node("n3"))
    store.patch("nodes", "n1", {"metadata": {"labels": {"pool": "a"}}})
    store.delete("nodes", "n2")
    store.create("pods", pod("p1", "n3"))
    wait(lambda: len(rec.seen()) == 6 and pods.by_index("node", "n3"))
    assert rec.seen()[3:] == [("add", "n3"), ("update", "n1"), ("delete", "n2")]
    n1 = nodes.get("n1")
    assert n1 is not None and n1["metadata"]["labels"] == {"pool": "a"}
    assert nodes.get("n2") is None and nodes.by_index("node", "n2") == []
    assert nodes.lists == 1 and pods.lists == 1


def test_late_handler_gets_the_cache_replayed_and_resync_replays_updates(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    api_server.store.create("nodes", node("a"))
    inf = running("nodes")
    wait(inf.has_synced)
    rec = Recorder()
    inf.add_handler(rec.handler())
    assert rec.seen() == [("add", "a")]
    inf.resync()
    assert rec.seen() == [("add", "a"), ("update", "a")]


def test_field_selector_limits_list_and_watch(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    store = api_server.store
    store.create("nodes", node("mine"))
    store.create("nodes", node("other"))
    rec = Recorder()
    inf = running("nodes", rec, kwargs={"field_selector": "metadata.name=mine"})
    wait(inf.has_synced)
    store.patch("nodes", "other", {"metadata": {"labels": {"x": "1"}}})
    store.patch("nodes", "mine", {"metadata": {"labels": {"x": "1"}}})
    wait(lambda: len(rec.seen()) == 2)
    assert rec.seen() == [("add", "mine"), ("update", "mine")]
    assert inf.keys() == ["mine"]


def test_outage_resumes_the_watch_without_a_relist(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    rec = Recorder()
    inf = running("nodes", rec, request_timeout=1.0)
    wait(inf.has_synced)
    api_server.store.wait_for_watchers(1)
    api_server.down()
    api_server.store.create("nodes", node("during-outage"))
    time.sleep(0.5)
    api_server.up()
    wait(lambda: ("add", "during-outage") in rec.seen())
    assert inf.lists == 1  # the kept history covered the gap: no second list
    assert inf.watches >= 2


def test_expired_resource_version_relists_and_diffs(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    store = api_server.store
    store.create("nodes", node("stays"))
    store.create("nodes", node("goes"))
    rec = Recorder()
    inf = running("nodes", rec, request_timeout=1.0)
    wait(inf.has_synced)
    store.wait_for_watchers(1)
    api_server.down()
    store.delete("nodes", "goes")
    store.create("nodes", node("new"))
    store.compact()  # etcd compaction: the informer's resourceVersion is gone
    api_server.up()
    wait(lambda: inf.lists == 2 and ("add", "new") in rec.seen())
    assert ("delete", "goes") in rec.seen()
    assert ("update", "stays") not in rec.seen()  # unchanged objects are not replayed by a re-list
    assert sorted(inf.keys()) == ["new", "stays"]


def test_bookmarks_advance_the_resource_version(
    api_server_factory: Callable[..., APIServer],  # noqa: F811
) -> None:
    from kubernetes import client

    server = api_server_factory(bookmark_interval=0.1)
    server.store.create("nodes", node("a"))
    api = make_api_client(client_configuration=server.client_config())
    inf = Informer("nodes", client.CoreV1Api(api).list_node)
    stop = threading.Event()
    t = threading.Thread(target=inf.run, args=(stop,), name="test-informer-bookmarks")
    t.start()
    try:
        wait(inf.has_synced)
        listed_at = inf.resource_version
        server.store.create("pods", pod("p", "a"))  # another resource moves the global revision
        wait(lambda: int(inf.resource_version) > int(listed_at))
        assert len(inf) == 1
    finally:
        stop.set()
        inf.close()
        t.join(5)
        api.close()
    assert not t.is_alive()


def test_close_cuts_a_blocked_watch_promptly(
    api_server: APIServer,  # noqa: F811
) -> None:
    from kubernetes import client

    api = make_api_client(client_configuration=api_server.client_config())
    inf = Informer("nodes", client.CoreV1Api(api).list_node, watch_timeout=300)
    stop = threading.Event()
    t = threading.Thread(target=inf.run, args=(stop,), name="test-informer-close")
    t.start()
    wait(inf.has_synced)
    api_server.store.wait_for_watchers(1)
    t0 = time.monotonic()
    inf.close()
    t.join(5)
    api.close()
    assert not t.is_alive() and time.monotonic() - t0 < 2.0


def test_paged_list_follows_continue_tokens(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    for i in range(5):
        api_server.store.create("nodes", node(f"n{i}"))
    inf = running("nodes", page_size=2)
    wait(inf.has_synced)
    assert sorted(inf.keys()) == [f"n{i}" for i in range(5)]
    lists = [r for r in api_server.requests if r.path == "/api/v1/nodes" and r.query.get("watch") != "true"]
    assert [r.query.get("limit") for r in lists] == ["2", "2", "2"]
    assert [bool(r.query.get("continue")) for r in lists] == [False, True, True]
    assert inf.lists == 1


def test_a_stopped_informer_asks_for_no_more_pages(api_server: APIServer) -> None:  # noqa: F811
    """A first list of many pages ends at the page where the process stopped: a stopped process does not
    stay up for the rest of a large list."""
    for i in range(6):
        api_server.store.create("nodes", node(f"n{i}"))
    api = make_api_client(client_configuration=api_server.client_config())
    fn, kwargs = list_call(api, Watch("nodes", groups.NODES))
    stop = threading.Event()
    inf = Informer("nodes", fn, kwargs, page_size=1)
    inf.add_handler(EventHandler(on_add=lambda _o: stop.set()))  # stopped as the first page goes in
    t = threading.Thread(target=inf.run, args=(stop,), name="test-informer-stop")
    t.start()
    t.join(5)
    ended = not t.is_alive()  # by itself, without close()
    inf.close()
    t.join(5)
    api.close()
    assert ended and not inf.has_synced()
    lists = [r for r in api_server.requests if r.path == "/api/v1/nodes" and r.query.get("watch") != "true"]
    assert len(lists) <= 2  # the first page and the one already asked for, not all six


def test_listed_objects_name_their_kind_as_watched_ones_do(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],
) -> None:
    """kube-apiserver lists a built-in type's items without kind/apiVersion; the cache gives them the
    list's, so a listed pod and a watched one read alike (an Event about either names a Pod)."""
    api_server.store.create("pods", pod("listed", "n0"))
    pods = running("pods")
    wait(pods.has_synced)
    api_server.store.create("pods", pod("watched", "n0"))
    wait(lambda: pods.get("default/watched") is not None)
    kinds = {object_key(o): (o.get("kind"), o.get("apiVersion")) for o in pods.objects()}
    assert kinds == {"default/listed": ("Pod", "v1"), "default/watched": ("Pod", "v1")}
