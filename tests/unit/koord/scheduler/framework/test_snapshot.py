"""The snapshot's derived columns, topology codes and domain sums stay equal to a fresh computation through
random cluster changes (pods bound and deleted, nodes relabelled, added and removed, so rows move),
while each cycle catches up only on the rows written since; transient columns are bounded."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from koord.scheduler.cache.cache import Cache
from koord.scheduler.framework import snapshot as snapshot_module
from koord.scheduler.framework.snapshot import Snapshot, per_domain
from koord.scheduler.framework.types import NodeInfo
from koordshared.testing.objects import node, pod
from tests.support.counting import count_calls


def web_pods(ni: NodeInfo) -> int:
    return sum(1 for p in ni.pods.values() if p.labels.get("app") == "web")


def test_columns_follow_random_changes() -> None:
    rng = random.Random(7)
    cache, snap = Cache(), Snapshot()
    nodes = {f"n{i}": node(f"n{i}", labels={"zone": f"z{i % 3}"}) for i in range(40)}
    for n in nodes.values():
        cache.add_node(n)
    pods: dict[str, dict[str, Any]] = {}
    serial = 0
    for _cycle in range(300):
        for _ in range(rng.randint(1, 4)):
            action = rng.random()
            if action < 0.5 and nodes:
                serial += 1
                p = pod(
                    f"p{serial}", node_name=rng.choice(list(nodes)), labels={"app": rng.choice(["web", "db"])}
                )
                pods[p["metadata"]["name"]] = p
                cache.add_pod(p)
            elif action < 0.7 and pods:
                cache.remove_pod(pods.pop(rng.choice(list(pods))))
            elif action < 0.8 and nodes:
                name = rng.choice(list(nodes))
                labels = {"zone": f"z{rng.randint(0, 4)}"} if rng.random() < 0.8 else {}
                nodes[name] = node(name, labels=labels)
                cache.update_node(nodes[name], nodes[name])
            elif action < 0.9 and len(nodes) > 5:
                name = rng.choice(list(nodes))
                for key in [k for k, p in pods.items() if p["spec"]["nodeName"] == name]:
                    cache.remove_pod(pods.pop(key))
                cache.remove_node(nodes.pop(name))
            else:
                serial += 1
                name = f"m{serial}"
                nodes[name] = node(name, labels={"zone": f"z{rng.randint(0, 4)}"})
                cache.add_node(nodes[name])
        cache.update_snapshot(snap)
        column = snap.derived("web", web_pods, np.int64)
        assert column.tolist() == [web_pods(ni) for ni in snap.infos]
        codes, table = snap.topology("zone")
        assert [(-1 if c < 0 else next(v for v, k in table.items() if k == c)) for c in codes.tolist()] == [
            ni.labels.get("zone", -1) for ni in snap.infos
        ]
        sums = snap.domain_sums("web", column, "zone")
        assert sums.tolist()[: len(table)] == per_domain(codes, column, len(table)).tolist()


def test_transient_columns_are_bounded() -> None:
    snap = Snapshot()
    snap.set(NodeInfo("n", node("n")))
    limit = snapshot_module.TRANSIENT_COLUMNS
    for i in range(limit + 10):
        snap.derived(("t", i), lambda ni: 1, np.int64, transient=True)
    snap.derived("kept", lambda ni: 1, np.int64)
    assert len(snap._derived) == limit + 1  # the oldest transient ones went; the plain one stays
    assert ("t", 0) not in snap._derived and ("t", limit + 9) in snap._derived


def test_a_column_of_the_node_object_is_recomputed_only_for_another_node_object() -> None:
    snap = Snapshot()
    for i in range(4):
        snap.set(NodeInfo(f"n{i}", node(f"n{i}", labels={"zone": f"z{i}"})))
    calls: list[str] = []

    def zone(ni: NodeInfo) -> str:
        calls.append(ni.name)
        return str(ni.labels.get("zone"))

    assert snap.derived("zone", zone, of_node=True).tolist() == ["z0", "z1", "z2", "z3"]
    calls.clear()
    # Rows rewritten with the same node object (a reservation's room restored for a cycle, and back).
    for name in ("n1", "n2"):
        ni = snap.node_info(name)
        assert ni is not None
        restored = ni.clone()
        restored.requested["cpu"] = 0
        snap.set(restored)
        snap.set(ni)
    assert snap.derived("zone", zone, of_node=True).tolist() == ["z0", "z1", "z2", "z3"]
    assert calls == []
    # Another node object: that row again; a removed node's row taken by the last keeps its value.
    snap.set(NodeInfo("n2", node("n2", labels={"zone": "moved"})))
    snap.remove("n0")
    assert snap.derived("zone", zone, of_node=True).tolist() == ["z3", "z1", "moved"]
    assert calls == ["n2"]


def test_a_row_rewritten_with_the_same_allocatable_writes_requested_only() -> None:
    snap = Snapshot()
    ni = NodeInfo("n", node("n", cpu="4", memory="8Gi"))
    snap.set(ni)
    cpu = snap.column("cpu")
    snap.allocatable[0, cpu] = -1  # a marker: a second write of the same allocatable would erase it
    restored = ni.clone()
    restored.requested["cpu"] = 1500
    snap.set(restored)
    assert snap.allocatable[0, cpu] == -1 and snap.requested[0, cpu] == 1500
    again = restored.clone()
    again.requested["example.com/gpu"] = 1  # a resource the snapshot had no column for
    snap.set(again)
    assert snap.requested[0, cpu] == 1500 and snap.requested[0, snap.column("example.com/gpu")] == 1
    # Another allocatable (the node updated) is written.
    snap.set(NodeInfo("n", node("n", cpu="8", memory="8Gi")))
    assert snap.allocatable[0, cpu] == 8000 and snap.requested[0, cpu] == 0


def test_overlaid_rows_are_put_back_as_they_were() -> None:
    snap = Snapshot()
    ni = NodeInfo("n", node("n"))
    snap.set(ni)
    restored = ni.clone()
    restored.requested["cpu"] = 500
    snap.overlay(restored)
    again = restored.clone()  # a second plugin's copy on top: the first holder is what comes back
    snap.overlay(again)
    snap.overlay(NodeInfo("new", node("new")))
    assert snap.node_info("n") is again and snap.requested[0, snap.column("cpu")] == 500
    snap.put_back()
    assert snap.node_info("n") is ni and snap.node_info("new") is None
    assert snap.requested[0, snap.column("cpu")] == 0
    snap.put_back()  # nothing overlaid since: nothing changes
    assert snap.node_info("n") is ni


def test_held_rows_overlaid_again_with_the_same_copy_are_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = Snapshot()
    infos = [NodeInfo(n, node(n)) for n in ("a", "b", "c")]
    for ni in infos:
        snap.set(ni)
    copies = []
    for ni in infos:
        copy = ni.clone()
        copy.requested["cpu"] = 500
        copies.append(copy)
        snap.overlay(copy)
    writes = count_calls(monkeypatch, Snapshot, "_write_row")
    snap.put_back(hold=True)
    assert writes.n == 0 and snap.node_info("a") is copies[0]
    assert snap.underneath("a") is infos[0]
    snap.set(NodeInfo("b", infos[1].node))  # the cache's change: no overlay held on that row any more
    snap.overlay(copies[0])  # the same copy again: nothing written
    assert writes.n == 1 and snap.node_info("a") is copies[0]
    snap.settle()  # c was not overlaid again: its own NodeInfo back
    assert writes.n == 2 and snap.node_info("c") is infos[2]
    assert snap.requested[snap.index["c"], snap.column("cpu")] == 0
    snap.put_back()  # without hold: every row its own at once
    assert snap.node_info("a") is infos[0] and snap.requested[snap.index["a"], snap.column("cpu")] == 0


def test_held_rows_kept_overlaid_in_one_step_are_neither_visited_nor_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snap = Snapshot()
    infos = [NodeInfo(n, node(n)) for n in ("a", "b", "c", "d")]
    for ni in infos:
        snap.set(ni)
    copies = {}
    for ni in infos[:3]:
        copies[ni.name] = copy = ni.clone()
        copy.requested["cpu"] = 500
        snap.overlay(copy)
    position = snap.written
    snap.put_back(hold=True)
    snap.set(NodeInfo("b", infos[1].node))  # the cache's change
    assert snap.names_written_since(position) == frozenset({"b"})
    writes = count_calls(monkeypatch, Snapshot, "_write_row")
    overlays = count_calls(monkeypatch, Snapshot, "overlay")
    # a and c show last cycle's copies: kept at once; d was never overlaid: told back.
    assert snap.keep_overlays({"a", "c", "d"}) == {"d"}
    assert writes.n == 0 and overlays.n == 0
    snap.settle()
    assert snap.node_info("a") is copies["a"] and snap.node_info("c") is copies["c"]
    snap.put_back()  # the kept rows are put back as the overlaid ones are
    assert snap.node_info("a") is infos[0] and snap.node_info("c") is infos[2]
    assert snap.requested[snap.index["a"], snap.column("cpu")] == 0
