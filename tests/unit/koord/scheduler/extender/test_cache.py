"""The extender on koord-scheduler's cache and snapshot: ``/bind`` assumes the pod on its node before the
binding POST, so the next ``/filter`` counts it before the informer has seen the binding; a failed POST
forgets it; the bound pod arriving from the informer confirms it (counted once), its deletion frees the
room. Nodes come and go through the informer, and batch plugins get snapshot rows unless a node named
in the request is unknown."""

from __future__ import annotations

from typing import Any

from koord.scheduler.framework import CycleState, NodeSet, Obj
from koordshared.testing.objects import pod
from tests.support.scheduler.extenderenv import ServedExtender

FIT = {"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "NodeResourcesFit"}]}}}]}


def cpu_pod(name: str, cpu: str, node: str = "") -> dict[str, Any]:
    return pod(name, uid=f"uid-{name}", requests={"cpu": cpu}, node_name=node)


def failed(e: ServedExtender, p: Obj, nodes: list[str]) -> dict[str, str]:
    status, res = e.post("filter", {"Pod": p, "NodeNames": nodes})
    assert status == 200 and res["Error"] == "", res
    return dict(res["FailedNodes"])


def bind(e: ServedExtender, p: Obj, node: str) -> str:
    meta = p["metadata"]
    _, ans = e.post(
        "bind", {"PodName": meta["name"], "PodNamespace": "default", "PodUID": meta["uid"], "Node": node}
    )
    return str(ans["Error"])


def test_bind_assumes_the_pod_until_the_informer_confirms_it() -> None:
    e = ServedExtender(FIT)
    try:
        e.add_node("a", cpu="4")
        e.add_node("b", cpu="4")
        first = cpu_pod("first", "3")
        assert failed(e, first, ["a", "b"]) == {}
        assert bind(e, first, "a") == ""
        # the binding is not in the pod cache yet; the cache counts it anyway
        assert failed(e, cpu_pod("second", "3"), ["a", "b"]) == {"a": "Insufficient cpu"}
        with e.handle.cycle():
            assert [p["metadata"]["name"] for p in e.handle.pods_on_node("a")] == ["first"]

        e.binder.fail_with = 'pods "second" is forbidden'
        second = cpu_pod("second", "3")
        assert bind(e, second, "b") == 'pods "second" is forbidden'
        assert failed(e, cpu_pod("third", "3"), ["b"]) == {}  # forgotten with the failed POST
        e.binder.fail_with = ""

        e.pods.put(cpu_pod("first", "3", node="a"))  # the informer sees the binding: confirmed, once
        assert failed(e, cpu_pod("small", "1"), ["a"]) == {}
        assert failed(e, cpu_pod("two", "2"), ["a"]) == {"a": "Insufficient cpu"}
        e.pods.remove("default/first")
        assert failed(e, cpu_pod("big", "4"), ["a"]) == {}
        with e.handle.cycle():
            assert e.handle.pods_on_node("a") == []
    finally:
        e.close()


def test_a_pod_deleted_before_its_binding_is_seen_leaves_the_cache() -> None:
    e = ServedExtender(FIT)
    try:
        e.add_node("a", cpu="4")
        p = cpu_pod("p", "3")
        e.pods.put(p)  # pending, as the informer saw it
        assert bind(e, p, "a") == ""
        assert failed(e, cpu_pod("q", "2"), ["a"]) == {"a": "Insufficient cpu"}
        e.pods.remove("default/p")  # the watch never showed it bound
        assert failed(e, cpu_pod("q", "2"), ["a"]) == {}
        la = e.framework.instances["LoadAwareScheduling"].cache
        assert la.debug("a")["pods"] == []  # LoadAware let go of its estimate as well
    finally:
        e.close()


def test_binding_a_pod_the_cache_already_holds_counts_it_once() -> None:
    e = ServedExtender(FIT)
    try:
        e.add_node("a", cpu="4")
        bound = cpu_pod("p", "3", node="a")
        e.pods.put(bound)  # kube-scheduler retries a /bind the informer has already confirmed
        e.binder.fail_with = "already bound"
        assert bind(e, bound, "a") == "already bound"
        assert failed(e, cpu_pod("q", "2"), ["a"]) == {"a": "Insufficient cpu"}  # still there, once
    finally:
        e.close()


class RowSpy:
    """A batch filter that records whether it was given snapshot rows."""

    name = "RowSpy"

    def __init__(self, args: Any, handle: Any) -> None:
        self.rows: list[bool] = []

    def filter(self, state: CycleState, pod: Obj, node_info: Any) -> None:
        return None

    def filter_nodes(self, state: CycleState, pod: Obj, nodes: NodeSet) -> list[None]:
        self.rows.append(nodes.rows is not None)
        return [None] * len(nodes)


def test_nodes_follow_the_informer_and_batch_plugins_get_rows() -> None:
    spy_profile = {"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "RowSpy"}]}}}]}
    e = ServedExtender(spy_profile, {"RowSpy": RowSpy})
    spy = e.framework.instances["RowSpy"]
    try:
        e.add_node("a")
        assert failed(e, pod("p"), ["a"]) == {}
        e.add_node("late")
        e.report("late", cpu_milli=16000)  # LoadAware (default multiPoint) now rejects it
        assert failed(e, pod("p"), ["late", "a"]) == {"late": "node(s) cpu usage exceed threshold"}
        assert spy.rows == [True, True]
        # a node kube-scheduler knows and the informer has not delivered: judged node by node
        assert failed(e, pod("p"), ["a", "ghost"]) == {}
        assert spy.rows[-1] is False
        assert e.get("/debug/nodes/another-ghost")[0] == 200
        slots = e.framework.instances["LoadAwareScheduling"].cache.table.slots
        assert set(slots) == {"a", "late"}  # names without a Node object take no room
        e.nodes.remove("late")
        assert failed(e, pod("p"), ["late"]) == {}  # gone: unknown again, no NodeMetric opinion
        _, scores = e.post("prioritize", {"Pod": pod("p"), "NodeNames": ["a", "late"]})
        assert {s["Host"] for s in scores} == {"a", "late"}
    finally:
        e.close()


def test_the_same_node_names_asked_again_follow_the_nodes_rows() -> None:
    """kube-scheduler sends the same NodeNames pod after pod; nodes leaving and coming back in between
    move the snapshot's rows, and each answer still judges the nodes named."""
    e = ServedExtender(FIT)
    try:
        for name in ("a", "b", "c"):
            e.add_node(name, cpu="4")
        names = ["a", "b", "c"]
        big = cpu_pod("big", "3")
        assert failed(e, big, names) == {}
        e.pods.put(cpu_pod("filler", "2", node="a"))
        assert failed(e, big, names) == {"a": "Insufficient cpu"}
        e.nodes.remove("a")  # the last row moves into a's; a is unknown now
        assert failed(e, big, names) == {}  # an unknown node: no opinion from NodeResourcesFit
        _, scores = e.post("prioritize", {"Pod": big, "NodeNames": names})
        assert [s["Host"] for s in scores] == names
        e.add_node("a", cpu="4")  # back, in another row; the filler still counts on it
        assert failed(e, big, names) == {"a": "Insufficient cpu"}
        e.nodes.remove("c")
        e.nodes.remove("b")
        assert failed(e, big, names) == {"a": "Insufficient cpu"}  # fewer rows than names asked
        assert failed(e, big, ["a"]) == {"a": "Insufficient cpu"}
    finally:
        e.close()
