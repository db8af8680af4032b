"""An informer listing in parts (the scheduler's pods: assigned, then pending): every part but the last
is whole before the cache counts as synced, the last is added page by page after it, and all parts read
one snapshot the watch resumes from."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.app import ASSIGNED_THEN_PENDING, watches
from koordlet.testing import wait_until
from koordshared.apis.meta import groups
from koordshared.kube.client import close_client, make_api_client
from koordshared.kube.informer import EventHandler, Informer
from koordshared.kube.informers import InformerSet, Watch, list_call
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401


def pod(name: str, node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


class Gate:
    """A list function that records every call and holds the pending part's second page until let go."""

    def __init__(self, list_fn: Any) -> None:
        self.list_fn = list_fn
        self.calls: list[dict[str, Any]] = []
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(dict(kwargs))
        if kwargs.get("field_selector", "").endswith("spec.nodeName=") and kwargs.get("_continue"):
            self.held.set()
            assert self.release.wait(10)
        return self.list_fn(**kwargs)


def stopped(inf: Informer, t: threading.Thread, stop: threading.Event, api: Any) -> None:
    stop.set()
    inf.close()
    t.join(5)
    close_client(api)
    assert not t.is_alive(), "informer did not stop"


@pytest.fixture
def gated(api_server: APIServer) -> Iterator[tuple[Informer, Gate, APIServer, threading.Thread]]:  # noqa: F811
    """The informer (pages of one pod) and its thread, not started; stopped and joined at the end."""
    api = make_api_client(client_configuration=api_server.client_config())
    fn, kwargs = list_call(api, Watch("pods", groups.PODS, groups.NON_TERMINAL_PODS))
    gate = Gate(fn)
    inf = Informer("pods", gate, kwargs, page_size=1, list_parts=ASSIGNED_THEN_PENDING)
    stop = threading.Event()
    t = threading.Thread(target=inf.run, args=(stop,), name="test-informer-parts")
    yield inf, gate, api_server, t
    gate.release.set()
    stop.set()
    inf.close()
    if t.is_alive():
        t.join(5)
        assert not t.is_alive(), "informer did not stop"
    close_client(api)


def test_synced_with_every_assigned_pod_and_the_first_pending_page(
    gated: tuple[Informer, Gate, APIServer, threading.Thread],
) -> None:
    inf, gate, server, t = gated
    for name, node in (("a1", "n1"), ("a2", "n2"), ("p1", ""), ("p2", ""), ("p3", "")):
        server.store.create("pods", pod(name, node))
    t.start()
    assert gate.held.wait(10)  # asked for while the first pending page is applied
    assert wait_until(inf.has_synced, 10)
    keys = sorted(inf.keys())
    assert keys[:2] == ["default/a1", "default/a2"] and len(keys) == 3  # one pending page of one pod
    gate.release.set()
    assert wait_until(lambda: len(inf) == 5, 10)
    selectors = [c["field_selector"] for c in gate.calls if not c.get("watch")]
    base = groups.NON_TERMINAL_PODS
    assert selectors == [f"{base},spec.nodeName!="] * 2 + [f"{base},spec.nodeName="] * 3
    first_pending = next(c for c in gate.calls if c["field_selector"].endswith("spec.nodeName="))
    assert first_pending["resource_version_match"] == "Exact"
    assert wait_until(lambda: inf.watches == 1, 10)
    watch = next(c for c in gate.calls if c.get("watch"))
    assert watch["resource_version"] == first_pending["resource_version"] != ""  # one snapshot
    assert watch["field_selector"] == groups.NON_TERMINAL_PODS
    assert inf.lists == 1


def test_scheduler_lists_assigned_pods_before_pending_ones() -> None:
    pods = next(w for w in watches() if w.name == "pods")
    assert pods.list_parts == ("spec.nodeName!=", "spec.nodeName=")
    assert next(w for w in watches() if w.name == "nodes").list_parts == ()


def test_next_page_is_asked_for_while_this_one_is_trimmed_and_pages_are_added_as_they_come(
    api_server: APIServer,  # noqa: F811
) -> None:
    for i in range(3):
        api_server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}})
    api = make_api_client(client_configuration=api_server.client_config())
    fn, kwargs = list_call(api, Watch("nodes", groups.NODES))
    asked: list[str] = []
    seen_at_ask: list[list[str]] = []
    synced_at_ask: list[bool] = []
    added: list[str] = []
    second = threading.Event()

    def list_fn(**kw: Any) -> Any:
        if not kw.get("watch"):
            asked.append(kw.get("_continue") or "first")
            seen_at_ask.append(list(added))
            synced_at_ask.append(inf.has_synced())
            if len(asked) == 2:
                second.set()
        return fn(**kw)

    overlapped: list[bool] = []

    def transform(obj: Any) -> Any:
        if not overlapped:
            overlapped.append(second.wait(5))  # the second page is on its way while the first is trimmed
        return obj

    inf = Informer("nodes", list_fn, kwargs, page_size=1, transform=transform)
    inf.add_handler(EventHandler(on_add=lambda o: added.append(o["metadata"]["name"])))
    stop = threading.Event()
    t = threading.Thread(target=inf.run, args=(stop,), name="test-informer-pages")
    t.start()
    try:
        assert wait_until(inf.has_synced, 10)
        assert overlapped == [True]
        assert len(asked) == 3 and seen_at_ask[2] == ["n0"]  # the first page was in the cache by then
        assert synced_at_ask == [False] * 3  # but the cache is synced only with its last page
        assert sorted(added) == ["n0", "n1", "n2"]
    finally:
        stopped(inf, t, stop, api)


def test_the_rest_of_the_pending_part_waits_for_hold(api_server: APIServer) -> None:  # noqa: F811
    for name, node in (("a1", "n1"), ("p1", ""), ("p2", ""), ("p3", "")):
        api_server.store.create("pods", pod(name, node))
    api = make_api_client(client_configuration=api_server.client_config())
    fn, kwargs = list_call(api, Watch("pods", groups.PODS, groups.NON_TERMINAL_PODS))
    pending_asks: list[str] = []

    def list_fn(**kw: Any) -> Any:
        if not kw.get("watch") and kw["field_selector"].endswith("spec.nodeName="):
            pending_asks.append(kw.get("_continue") or "first")
        return fn(**kw)

    others_synced = threading.Event()
    inf = Informer(
        "pods", list_fn, kwargs, page_size=1, list_parts=ASSIGNED_THEN_PENDING, hold=others_synced.is_set
    )
    stop = threading.Event()
    t = threading.Thread(target=inf.run, args=(stop,), name="test-informer-hold")
    t.start()
    try:
        assert wait_until(inf.has_synced, 10)
        time.sleep(0.3)
        assert len(pending_asks) == 2 and len(inf) == 2  # the first page in, the second asked for ahead
        others_synced.set()
        assert wait_until(lambda: len(inf) == 4, 10)
        assert len(pending_asks) == 3
    finally:
        stopped(inf, t, stop, api)


def test_a_set_holds_a_cache_in_parts_until_its_other_caches_are_synced(
    api_server: APIServer,  # noqa: F811
) -> None:
    api = make_api_client(client_configuration=api_server.client_config())
    nodes, pods = watches()
    informers = InformerSet(api, [nodes, pods])
    hold = informers["pods"]._hold
    assert hold is not None and informers["nodes"]._hold is None
    assert not hold()  # the nodes are not listed yet
    informers["nodes"]._synced.set()
    assert hold()
    close_client(api)
