"""The nodes' search order, as kube-scheduler's nodeTree lists them: one node of each zone in turn, zones
in the order they appeared, nodes in each zone in the order they were added; removals and zone changes
keep the rest in place. The cache hands it to the snapshot, and a cycle's rotated walk follows it."""

from __future__ import annotations

from koord.scheduler.cache.cache import Cache
from koord.scheduler.cache.nodetree import NodeTree, zone_key
from koord.scheduler.framework.snapshot import Snapshot
from koordshared.testing import node

ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"


def zoned(name: str, zone: str, **labels: str) -> dict[str, object]:
    return node(name, labels={ZONE: zone, **labels} if zone else labels)


def test_zone_key_as_kube_scheduler() -> None:
    assert zone_key(node("n")) == ""
    assert zone_key(zoned("n", "a")) == ":\x00:a"
    assert zone_key(zoned("n", "a", **{REGION: "r"})) == "r:\x00:a"
    assert zone_key(node("n", labels={"failure-domain.beta.kubernetes.io/zone": "b"})) == ":\x00:b"


def test_one_node_of_each_zone_in_turn() -> None:
    tree = NodeTree()
    for name, zone in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b"), ("c1", "c")):
        tree.add(name, zoned(name, zone))
    assert tree.names() == ["a1", "b1", "c1", "a2", "b2", "a3"]
    tree.remove("b1")
    assert tree.names() == ["a1", "b2", "c1", "a2", "a3"]
    tree.add("a1", zoned("a1", "c"))  # its zone changed: last of its new zone
    assert tree.names() == ["a2", "b2", "c1", "a3", "a1"]
    version = tree.version
    tree.add("a2", zoned("a2", "a"))  # an update in place changes nothing
    assert tree.version == version
    tree.remove("b2")  # zone b empties and goes
    tree.add("b3", zoned("b3", "b"))  # and comes back last
    assert tree.names() == ["a2", "c1", "b3", "a3", "a1"]


def test_a_cycle_walks_the_nodes_zone_by_zone_whatever_their_creation_order() -> None:
    cache, snapshot = Cache(), Snapshot()
    for zone in "abc":
        for i in range(4):
            cache.add_node(zoned(f"{zone}{i}", zone))
    cache.update_snapshot(snapshot)
    assert snapshot.rotated(0).names[:6] == ["a0", "b0", "c0", "a1", "b1", "c1"]
    assert snapshot.rotated(4).names[:3] == ["b1", "c1", "a2"]
    cache.remove_node(zoned("b0", "b"))
    cache.add_node(zoned("d0", "d"))
    cache.update_snapshot(snapshot)
    assert snapshot.rotated(0).names[:5] == ["a0", "b1", "c0", "d0", "a1"]
    assert sorted(snapshot.rotated(0).names) == sorted(ni.name for ni in snapshot.node_infos())
