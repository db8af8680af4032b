"""What one NodeNUMAResource cycle works on, counted. A pod under a NUMA policy is looked at on every node,
so what a cycle stores, reads back and recomputes must follow the kinds of node and what changed since the
last cycle, not the number of nodes (the answers themselves are pinned by ``test_memo.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koord.scheduler.framework import CycleState, PodInfo
from koord.scheduler.framework import topologymanager as tm
from koord.scheduler.framework.snapshot import NodeSet, Snapshot
from koord.scheduler.framework.types import NodeInfo
from koord.scheduler.plugins.nodenumaresource import allocator, placement, placementscore
from koord.scheduler.plugins.nodenumaresource import plugin as plugin_module
from koord.scheduler.plugins.nodenumaresource.allocation import PodAllocation, allocation_of
from koord.scheduler.plugins.nodenumaresource.manager import ResourceManager
from koord.scheduler.plugins.nodenumaresource.scoring import Scorer
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension import numa as numaspec
from tests.support.counting import count_calls
from tests.support.scheduler.numakit import NUMA, S, add_node, kit, lsr

SINGLE = {"numaTopologyPolicy": "SingleNUMANode"}
NODES = 30


def _plugin(k: MemoryScheduler) -> Any:
    return k.scheduler.profiles[S].instances[NUMA]


def _cluster(placed: int = 0) -> MemoryScheduler:
    """``NODES`` alike nodes, ``placed`` SingleNUMANode pods already scheduled on them."""
    k = kit()
    for i in range(NODES):
        add_node(k, f"n{i:02d}")
    for i in range(placed):
        k.add_pod(lsr(f"placed-{i}", "2", numa=SINGLE))
    k.run()
    assert len(k.bound()) == placed
    k.cache.update_snapshot(k.snapshot)
    return k


def _filter(k: MemoryScheduler, pod: dict[str, Any]) -> tuple[CycleState, NodeSet]:
    p = _plugin(k)
    state = CycleState(PodInfo(pod))
    p.pre_filter(state, pod)
    nodes = NodeSet.of(k.snapshot, k.snapshot.node_infos())
    p.filter_nodes(state, pod, nodes)
    return state, nodes


@pytest.mark.parametrize("placed", [0, 1])
def test_filter_stores_an_affinity_a_kind_of_node_not_a_node(placed: int) -> None:
    # 30 alike nodes are one kind; after one pod landed, the node it took is a second kind. The cycle
    # keeps one entry each for the node it decided the kind on (it was one entry a node, written by name).
    k = _cluster(placed)
    state, nodes = _filter(k, lsr("p", "2", numa=SINGLE))
    store = tm.store(state)
    assert len(store.affinity) == 1 + placed
    # every node still has the affinity its kind was given
    chosen = {ni.name: store.get_affinity(ni.name) for ni in nodes}
    assert None not in chosen.values() and len(set(chosen.values())) <= 1 + placed


def test_a_cycle_reads_no_nodes_affinity_back_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # Score found each node's affinity by its name (every node's name built, then looked up).
    k = _cluster(1)
    names = {"n": 0}
    original = NodeSet.names_at

    def counted(self: NodeSet, positions: Any) -> list[str]:
        got = original(self, positions)
        names["n"] += len(got)
        return got

    monkeypatch.setattr(NodeSet, "names_at", counted)
    pod = lsr("p", "2", numa=SINGLE)
    state, nodes = _filter(k, pod)
    _plugin(k).score_nodes(state, pod, nodes)
    assert names["n"] == 0  # it was two a node


def test_score_under_a_numa_policy_runs_no_whole_cluster_resource_score(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Under a NUMA policy every node is scored over its NUMA nodes: the node-level score was thrown away.
    k = _cluster(1)
    pod = lsr("p", "2", numa=SINGLE)
    state, nodes = _filter(k, pod)
    calls = count_calls(monkeypatch, Scorer, "score_nodes")
    scores = _plugin(k).score_nodes(state, pod, nodes)
    assert calls.n == 0
    assert len(set(scores.tolist())) == 2  # the node holding a pod scores apart from the empty ones


def test_reserve_takes_the_placement_worked_out_for_an_alike_node(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once a kind of node was placed on for a pod shape, a later pod of that shape landing on a node of
    # that kind reuses the placement (Reserve worked it out again on every pod).
    k = _cluster(2)
    calls = count_calls(monkeypatch, allocator, "from_node")
    for i in range(3):
        k.add_pod(lsr(f"p{i}", "2", numa=SINGLE))
        k.run()
        assert f"default/p{i}" in k.bound()
    assert calls.n == 0


def test_resource_codes_follow_each_rows_requested_and_allocatable(monkeypatch: pytest.MonkeyPatch) -> None:
    codes = placementscore.ResourceCodes()
    snap = Snapshot()
    for name in ("a", "b", "c"):
        snap.set(NodeInfo(name, {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}}))
    rows = np.arange(3)
    a, b, c = codes.codes(snap, rows).tolist()
    assert a == b == c
    worked = count_calls(monkeypatch, placementscore, "_items")
    info = NodeInfo("b", {"metadata": {"name": "b"}, "status": {"allocatable": {"cpu": "8"}}})
    snap.set(info)
    a, b, c = codes.codes(snap, rows).tolist()
    assert a == c != b
    assert worked.n == 2  # b's requested and allocatable only


def test_a_second_filter_in_one_cycle_keeps_every_nodes_affinity() -> None:
    # A node whose affinity the cycle already chose (shared with its kind) is admitted again alone,
    # within that affinity, as one chosen node by node is.
    k = _cluster(1)
    pod = lsr("p", "2", numa=SINGLE)
    state, nodes = _filter(k, pod)
    store = tm.store(state)
    before = {ni.name: store.get_affinity(ni.name) for ni in nodes}
    answer = _plugin(k).filter_nodes(state, pod, nodes)
    assert all(a is None or a.is_success for a in answer)
    assert {ni.name: store.get_affinity(ni.name) for ni in nodes} == before


def test_score_reads_the_kinds_filter_brought_up_to_date() -> None:
    # Filter checks every row for a change of its node's kind; Score in the same cycle, nothing written
    # since, reads the codes as they are (it checked its nodes' rows again).
    k = _cluster(1)
    codes = _plugin(k).kind_codes
    before = codes.checked
    pod = lsr("p", "2", numa=SINGLE)
    state, nodes = _filter(k, pod)
    _plugin(k).score_nodes(state, pod, nodes)
    assert codes.checked == before + 1


def test_a_bound_pods_update_with_the_placement_reserve_made_changes_no_holding() -> None:
    # The pod's own update, once bound, carries the placement Reserve made: the node's holding, its
    # version and the log of changed nodes stay as they are (its kind was worked out again each time).
    m = ResourceManager("MostAllocated")
    alloc = PodAllocation("u1", "default", "p", cpus=frozenset({0, 1}), numa=((0, (("cpu", 2000),)),))
    m.update("a", alloc)
    version = m.allocation("a").version
    _, position = m.changed_since(0)
    m.update("a", PodAllocation("u1", "default", "p", cpus=frozenset({0, 1}), numa=((0, (("cpu", 2000),)),)))
    assert m.allocation("a").version == version
    assert m.changed_since(position) == (set(), position)
    m.update("a", PodAllocation("u1", "default", "p", cpus=frozenset({2, 3}), numa=((0, (("cpu", 2000),)),)))
    assert m.allocation("a").version != version and m.changed_since(position)[0] == {"a"}


def test_pods_carrying_one_placement_text_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The binding thread reads back every placement written: pods of one shape placed alike carry the
    # same annotation texts, parsed once.
    parsed = count_calls(monkeypatch, numaspec, "resource_status")
    status = '{"cpuset":"4-5","numaNodeResources":[{"node":1,"resources":{"cpu":"2","memory":"3333Mi"}}]}'
    got = [
        allocation_of(
            {
                "metadata": {
                    "uid": f"u{i}",
                    "namespace": "default",
                    "name": f"p{i}",
                    "annotations": {numaspec.ANNOTATION_RESOURCE_STATUS: status},
                }
            }
        )
        for i in range(3)
    ]
    assert parsed.n <= 1
    assert [a.uid if a else None for a in got] == ["u0", "u1", "u2"]
    assert {(a.cpus, a.numa) for a in got if a} == {
        (frozenset({4, 5}), ((1, (("cpu", 2000), ("memory", 3333 << 20))),))
    }


def test_a_pod_under_a_numa_policy_reads_no_steering_label_column(monkeypatch: pytest.MonkeyPatch) -> None:
    # Such a pod is looked at on every node whatever its labels: the column saying which nodes steer
    # by label was caught up and read for nothing, in Filter and in Score.
    k = _cluster(1)
    asked: list[str] = []
    original = NodeSet.column

    def counted(self: NodeSet, key: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(key)
        return original(self, key, *args, **kwargs)

    monkeypatch.setattr(NodeSet, "column", counted)
    pod = lsr("p", "2", numa=SINGLE)
    state, nodes = _filter(k, pod)
    _plugin(k).score_nodes(state, pod, nodes)
    assert placement.LABELLED_COLUMN not in asked


def test_prebind_writes_a_workloads_alike_placements_from_one_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pods of one shape land alike on alike nodes: the resource-status text and the resource-spec with
    # the bind policy used are worked out once, not once a pod.
    k = _cluster()
    statuses = count_calls(monkeypatch, PodAllocation, "resource_status")
    specs = count_calls(monkeypatch, plugin_module, "resource_spec")
    for i in range(4):
        k.add_pod(lsr(f"w{i}", "2", memory="1234Mi", numa=SINGLE))
    k.run()
    assert len(k.bound()) == 4
    assert statuses.n <= 1 and specs.n <= 1
