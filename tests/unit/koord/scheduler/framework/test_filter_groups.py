"""Why nodes failed, as the filter search groups it: a batch plugin answering thousands of nodes with a
few shared Status objects, one answering with a boolean array (asked ``filter`` per rejected node
when the reasons are wanted) and a node-by-node plugin give each node the reason its first rejecting
plugin gave, tagged with that plugin, the same as judging the nodes one at a time; a search stopped
early reports only the nodes it went through."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koord.scheduler.framework import (
    Code,
    CodedVerdicts,
    CycleState,
    NodeInfo,
    NodeSet,
    Obj,
    Status,
    verdicts,
)
from koord.scheduler.framework.runtime import PluginFailure
from koord.scheduler.testing import SchedulerHarness
from koordshared.testing.objects import node, pod

EVEN = Status.unschedulable("even node")
THIRD = Status.unresolvable("every third node")
PASS = Status(Code.SUCCESS)  # an explicit success, as good as None


def _index(ni: NodeInfo) -> int:
    return int(ni.name.rsplit("-", 1)[1])


class Shared:
    """Batch statuses: the same two Status objects for many nodes, a Status of its own for some, explicit
    successes for others."""

    name = "Shared"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        i = _index(ni)
        if i % 3 == 0:
            return THIRD
        if i % 2 == 0:
            return EVEN
        if i % 5 == 0:
            return Status.unschedulable(f"five divides {ni.name}")
        return PASS if i % 17 == 0 else None

    def filter_nodes(self, state: CycleState, p: Obj, nodes: NodeSet) -> list[Status | None]:
        return [self.filter(state, p, ni) for ni in nodes]


class Bools:
    """A boolean batch answer; the reason comes from ``filter`` when asked."""

    name = "Bools"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        return Status.unschedulable(f"seven divides {ni.name}") if _index(ni) % 7 == 0 else None

    def filter_nodes(self, state: CycleState, p: Obj, nodes: NodeSet) -> np.ndarray:
        return np.array([_index(ni) % 7 != 0 for ni in nodes], dtype=bool)


class Eleven:
    """Node by node only."""

    name = "Eleven"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        return Status.unschedulable("eleven") if _index(ni) % 11 == 0 else None


PROFILE = {
    "plugins": {
        "multiPoint": {
            "enabled": [{"name": "Eleven"}, {"name": "Shared"}, {"name": "Bools"}],
            "disabled": [{"name": "*"}],
        }
    }
}


def _harness(n: int) -> SchedulerHarness:
    h = SchedulerHarness(PROFILE, plugins={"Shared": Shared, "Bools": Bools, "Eleven": Eleven})
    for i in range(n):
        h.nodes.put(node(f"n-{i}"))
    return h


def expected(i: int) -> tuple[str, str] | None:
    """Node ``n-i``'s (plugin, reason): the batch plugins run before the node-by-node one."""
    if i % 3 == 0:
        return "Shared", "every third node"
    if i % 2 == 0:
        return "Shared", "even node"
    if i % 5 == 0:
        return "Shared", f"five divides n-{i}"
    if i % 7 == 0:
        return "Bools", f"seven divides n-{i}"
    if i % 11 == 0:
        return "Eleven", "eleven"
    return None


def test_grouped_reasons_match_node_by_node() -> None:
    h = _harness(60)
    p = pod("p")
    with h.handle.cycle() as snapshot:
        nodes = snapshot.rotated(0)
        state = verdicts.new_state(p)
        found = h.framework.find_feasible(state, p, nodes)
        got = {n: (st.plugin, st.message) for n, st in found.statuses().items()}
        one_by_one = {ni.name: h.framework.filter_one(state, p, ni) for ni in nodes}
        out = verdicts.run_filter(h.framework, verdicts.new_state(p), p, nodes)
    want = {f"n-{i}": why for i in range(60) if (why := expected(i)) is not None}
    assert got == want
    # the same nodes fail node by node (with the profile's plugin order deciding the reason there)
    assert {n for n, st in one_by_one.items() if st is not None} == set(want)
    assert sorted(found.feasible.names) == sorted(set(one_by_one) - set(want))
    assert out.unresolvable == {n: m for n, (_, m) in want.items() if m == THIRD.message}
    assert out.failed == {n: m for n, (_, m) in want.items() if m != THIRD.message}
    assert out.rejected_by == {
        plugin: sum(1 for p_, _ in want.values() if p_ == plugin) for plugin in ("Shared", "Bools", "Eleven")
    }


def test_a_search_stopped_early_reports_the_nodes_it_went_through() -> None:
    h = _harness(60)
    p = pod("p")
    with h.handle.cycle() as snapshot:
        # in name order (the snapshot's own order is the cache's)
        nodes = NodeSet(snapshot, np.array([snapshot.index[f"n-{i}"] for i in range(60)], dtype=np.int64))
        state = verdicts.new_state(p)
        found = h.framework.find_feasible(state, p, nodes, want=3)
        got = found.statuses()
    assert found.feasible.names == ["n-1", "n-13", "n-17"]
    assert found.processed == 18
    assert set(got) == {f"n-{i}" for i in (0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16)}
    assert got["n-5"].plugin == "Shared" and got["n-5"].message == "five divides n-5"
    assert got["n-7"].plugin == "Bools" and got["n-7"].message == "seven divides n-7"
    assert got["n-11"].plugin == "Eleven"


class Worded:
    """A reason of its own for every node it rejects (more distinct statuses than are grouped)."""

    name = "Worded"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        i = _index(ni)
        if i % 4 == 0:
            return None
        return (Status.unresolvable if i % 3 == 0 else Status.unschedulable)(f"not {ni.name}")

    def filter_nodes(self, state: CycleState, p: Obj, nodes: NodeSet) -> list[Status | None]:
        return [self.filter(state, p, ni) for ni in nodes]


def test_a_reason_per_node() -> None:
    h = SchedulerHarness(
        {"plugins": {"multiPoint": {"enabled": [{"name": "Worded"}], "disabled": [{"name": "*"}]}}},
        plugins={"Worded": Worded},
    )
    for i in range(60):
        h.nodes.put(node(f"n-{i}"))
    p = pod("p")
    with h.handle.cycle() as snapshot:
        nodes = NodeSet(snapshot, np.array([snapshot.index[f"n-{i}"] for i in range(60)], dtype=np.int64))
        out = verdicts.run_filter(h.framework, verdicts.new_state(p), p, nodes)
        found = h.framework.find_feasible(verdicts.new_state(p), p, nodes, want=2)
        early = found.statuses()
    rejected = [i for i in range(60) if i % 4]
    assert out.failed == {f"n-{i}": f"not n-{i}" for i in rejected if i % 3}
    assert out.unresolvable == {f"n-{i}": f"not n-{i}" for i in rejected if i % 3 == 0}
    assert out.rejected_by == {"Worded": len(rejected)}
    assert found.feasible.names == ["n-0", "n-4"]
    assert {n: (st.plugin, st.message) for n, st in early.items()} == {
        f"n-{i}": ("Worded", f"not n-{i}") for i in (1, 2, 3)
    }


class Coded:
    """Shared's answer as codes (:class:`CodedVerdicts`), but for the five-divides reasons of their own;
    ``broken`` answers one code too few."""

    name = "Coded"
    broken = False

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        i = _index(ni)
        return THIRD if i % 3 == 0 else EVEN if i % 2 == 0 else PASS if i % 17 == 0 else None

    def filter_nodes(self, state: CycleState, p: Obj, nodes: NodeSet) -> CodedVerdicts:
        table = (None, THIRD, EVEN, PASS)
        codes = np.array([table.index(self.filter(state, p, ni)) for ni in nodes], dtype=np.int64)
        return CodedVerdicts(codes[:-1] if self.broken else codes, table)


def _alone(plugin: Any, n: int) -> SchedulerHarness:
    """A profile of ``plugin`` alone over nodes ``n-0`` .. ``n-{n-1}``."""
    profile = {"plugins": {"multiPoint": {"enabled": [{"name": plugin.name}], "disabled": [{"name": "*"}]}}}
    h = SchedulerHarness(profile, plugins={plugin.name: plugin})
    for i in range(n):
        h.nodes.put(node(f"n-{i}"))
    return h


def _in_name_order(snapshot: Any, n: int) -> NodeSet:
    return NodeSet(snapshot, np.array([snapshot.index[f"n-{i}"] for i in range(n)], dtype=np.int64))


def test_coded_answers_group_like_shared_statuses() -> None:
    h = _alone(Coded, 60)
    p = pod("p")
    with h.handle.cycle() as snapshot:
        nodes = _in_name_order(snapshot, 60)
        answer = h.framework.instances["Coded"].filter_nodes(CycleState(), p, nodes)
        assert list(answer) == [answer[k] for k in range(60)] == answer[:] and answer[3] is THIRD
        out = verdicts.run_filter(h.framework, verdicts.new_state(p), p, nodes)
        # the answer written from the caller's own names is the same
        names = [f"n-{i}" for i in range(60)]
        same = verdicts.run_filter(h.framework, verdicts.new_state(p), p, nodes, [*names])
        Coded.broken = True
        try:
            with pytest.raises(PluginFailure, match="answered"):
                h.framework.find_feasible(verdicts.new_state(p), p, nodes)
        finally:
            Coded.broken = False
    assert out.unresolvable == {f"n-{i}": THIRD.message for i in range(0, 60, 3)}
    assert out.failed == {f"n-{i}": EVEN.message for i in range(60) if i % 2 == 0 and i % 3}
    assert out.passed == [f"n-{i}" for i in range(60) if i % 2 and i % 3]
    assert out.rejected_by == {"Coded": 40}
    assert (same.passed, same.failed, same.unresolvable) == (out.passed, out.failed, out.unresolvable)


class Explained(Bools):
    """Bools that explains its rejections at once (``why_nodes``), counting its ``filter`` calls."""

    name = "Explained"
    calls = 0

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        Explained.calls += 1
        return super().filter(state, p, ni)

    def why_nodes(self, state: CycleState, p: Obj, nodes: NodeSet) -> CodedVerdicts:
        seven = Status.unschedulable("seven divides")
        return CodedVerdicts(np.zeros(len(nodes), dtype=np.int64), [seven])


def test_a_boolean_answer_explained_at_once_asks_filter_of_no_rejected_node() -> None:
    h = _alone(Explained, 70)
    p = pod("p")
    Explained.calls = 0
    with h.handle.cycle() as snapshot:
        nodes = _in_name_order(snapshot, 70)
        found = h.framework.find_feasible(verdicts.new_state(p), p, nodes, want=20)
        got = found.statuses()
    assert Explained.calls == 0
    # only the nodes the search went through, each with the plugin's grouped reason
    assert {n: (st.plugin, st.message) for n, st in got.items()} == {
        f"n-{i}": ("Explained", "seven divides") for i in (0, 7, 14, 21)
    }
