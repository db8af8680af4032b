"""The scheduler cache and its snapshot: assumed pods count at once and are confirmed or forgotten; a
removed node's pods stay accounted until they go; the incremental snapshot (rows, arrays, derived
columns) always equals one built from scratch, also after rows move and after the change log is trimmed."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from koord.scheduler.cache.cache import Cache
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.types import PodInfo
from koordshared.testing import node, pod


def test_assume_confirm_and_forget() -> None:
    cache, snap = Cache(), Snapshot()
    cache.add_node(node("a", "4", "8Gi"))
    pending = pod("p", requests={"cpu": "1", "memory": "1Gi"})
    info = PodInfo(pending)
    cache.assume_pod(info, "a")
    cache.update_snapshot(snap)
    a = snap.node_info("a")
    assert a is not None and a.requested["cpu"] == 1000 and cache.is_assumed(info.uid)
    bound = {**pending, "spec": {**pending["spec"], "nodeName": "a"}}
    cache.add_pod(bound)  # the informer confirms it
    assert not cache.is_assumed(info.uid)
    assert cache.forget_pod(info.uid) == ""  # confirmed pods are never forgotten
    other = PodInfo(pod("q", requests={"cpu": "2"}))
    cache.assume_pod(other, "a")
    assert cache.forget_pod(other.uid) == "a"
    cache.update_snapshot(snap)
    a = snap.node_info("a")
    assert a is not None and a.requested["cpu"] == 1000 and cache.counts() == (1, 1, 0)


def test_a_confirmed_pod_that_landed_elsewhere_moves() -> None:
    cache, snap = Cache(), Snapshot()
    for n in ("a", "b"):
        cache.add_node(node(n))
    p = pod("p", requests={"cpu": "1"})
    cache.assume_pod(PodInfo(p), "a")
    cache.add_pod({**p, "spec": {**p["spec"], "nodeName": "b"}})
    cache.update_snapshot(snap)
    assert snap.node_info("a").requested.get("cpu", 0) == 0  # type: ignore[union-attr]
    assert snap.node_info("b").requested["cpu"] == 1000  # type: ignore[union-attr]


def test_a_removed_node_keeps_its_pods_until_they_go_and_leaves_the_snapshot() -> None:
    cache, snap = Cache(), Snapshot()
    n = node("a")
    cache.add_node(n)
    p = pod("p", node_name="a", requests={"cpu": "1"})
    cache.add_pod(p)
    cache.update_snapshot(snap)
    assert len(snap) == 1
    cache.remove_node(n)
    cache.update_snapshot(snap)
    assert len(snap) == 0 and cache.counts() == (0, 1, 0)
    cache.remove_pod(p)
    assert cache.counts() == (0, 0, 0)


def rebuilt(cache: Cache) -> Snapshot:
    fresh = Snapshot()
    cache.update_snapshot(fresh)
    return fresh


def same(a: Snapshot, b: Snapshot) -> None:
    assert sorted(a.index) == sorted(b.index)
    for name in a.index:
        ia, ib = a.index[name], b.index[name]
        for res in {*a.resources, *b.resources}:
            ca, cb = a.column(res), b.column(res)
            assert a.requested[ia, ca] == b.requested[ib, cb], (name, res)
            assert a.allocatable[ia, ca] == b.allocatable[ib, cb], (name, res)
        assert (a.non_zero[ia] == b.non_zero[ib]).all()
        assert a.infos[ia].name == name and a.infos[ia].index == ia


def test_the_incremental_snapshot_equals_a_fresh_one_under_churn() -> None:
    rng = random.Random(7)
    cache, snap = Cache(), Snapshot()
    nodes: dict[str, dict[str, Any]] = {}
    pods: dict[str, dict[str, Any]] = {}
    calls = []
    for step in range(600):
        op = rng.random()
        if op < 0.2 or not nodes:
            name = f"n{rng.randrange(40)}"
            obj = node(
                name, str(rng.randrange(1, 9)), f"{rng.randrange(1, 9)}Gi", pods=str(rng.randrange(5, 50))
            )
            if rng.random() < 0.1:
                obj["status"]["allocatable"]["example.com/gpu"] = str(rng.randrange(1, 4))
            nodes[name] = obj
            cache.add_node(obj)
        elif op < 0.25:
            name = rng.choice(sorted(nodes))
            cache.remove_node(nodes.pop(name))
        elif op < 0.75:
            target = rng.choice(sorted(nodes))
            key = f"p{step}"
            req = {"cpu": f"{rng.randrange(1, 900)}m", "memory": f"{rng.randrange(1, 900)}Mi"}
            if rng.random() < 0.1:
                req["example.com/gpu"] = "1"
            obj = pod(key, node_name=target, requests=req)
            pods[key] = obj
            cache.add_pod(obj)
        elif pods:
            key = rng.choice(sorted(pods))
            cache.remove_pod(pods.pop(key))
        if rng.random() < 0.3:
            cache.update_snapshot(snap)
            calls.append(step)
    cache.update_snapshot(snap)
    same(snap, rebuilt(cache))
    assert len(calls) > 100


def test_derived_columns_are_recomputed_for_changed_nodes_only() -> None:
    cache, snap = Cache(), Snapshot()
    for i in range(5):
        cache.add_node(node(f"n{i}", labels={"zone": f"z{i % 2}"}))
    cache.update_snapshot(snap)
    seen: list[str] = []

    def zone(ni: object) -> str:
        seen.append(ni.name)  # type: ignore[attr-defined]
        return str(ni.labels.get("zone"))  # type: ignore[attr-defined]

    col = snap.derived("zone", zone)
    assert list(col) == ["z0", "z1", "z0", "z1", "z0"] and len(seen) == 5
    seen.clear()
    snap.derived("zone", zone)
    assert seen == []
    cache.add_node(node("n3", labels={"zone": "z9"}))
    cache.update_snapshot(snap)
    col = snap.derived("zone", zone)
    assert seen == ["n3"] and col[snap.index["n3"]] == "z9"
    cache.remove_node(node("n0"))  # the last row moves into row 0, with its derived value
    cache.update_snapshot(snap)
    seen.clear()
    col = snap.derived("zone", zone)
    assert seen == [] and list(col) == [ni.labels.get("zone") for ni in snap.infos]
    assert isinstance(col, np.ndarray)


def test_a_snapshot_older_than_the_trimmed_change_log_is_rebuilt_whole() -> None:
    cache = Cache()
    old = Snapshot()
    cache.add_node(node("keep"))
    cache.update_snapshot(old)
    for i in range(300):  # far more changes than the log keeps for one node
        cache.add_node(node("churn", str(1 + i % 7)))
    cache.remove_node(node("churn"))
    for i in range(70):
        cache.add_node(node(f"m{i}"))
    cache.update_snapshot(old)
    same(old, rebuilt(cache))
