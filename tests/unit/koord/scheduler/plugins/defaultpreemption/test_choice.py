"""DefaultPreemption's choices through koord-scheduler's real core, with cases written from
kube-scheduler's preemption tests (``default_preemption_test.go``): the victims on one node, the
PodDisruptionBudgets, the node picked, the number of candidates the args ask for, and the args."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.framework import PodInfo
from koord.scheduler.plugins.defaultpreemption.args import PreemptionArgs, parse_args
from koord.scheduler.plugins.defaultpreemption.candidates import Candidate, pick_one
from koord.scheduler.plugins.defaultpreemption.victims import Victims
from koordshared.apis.meta.strictargs import InvalidArgs
from tests.support.scheduler.memcluster import MemCluster, pdb

LOW, MID, HIGH = 0, 100, 1000


@pytest.fixture
def c() -> Iterator[MemCluster]:
    cluster = MemCluster()
    yield cluster
    cluster.close()


# ---- victims on one node (SelectVictimsOnNode) ----------------------------------------------------


def test_medium_priority_pod_is_preempted_but_the_small_low_priority_one_stays(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    c.pod("p1.1", "1", priority=LOW, node="n1")
    c.pod("p1.2", "3", priority=MID, node="n1")
    c.pod("high", "3", priority=HIGH)
    assert c.attempt("high") == "n1"
    assert c.deleted(1) == ["default/p1.2"]


def test_mixed_priorities_keep_the_most_important_pods(c: MemCluster) -> None:
    c.node("n1", cpu="5")
    for name, prio, started in (("a", MID, 50), ("b", LOW, 50), ("c", MID, 10), ("d", HIGH - 1, 50)):
        c.pod(name, "1", priority=prio, node="n1", started=started)
    c.pod("high", "3", priority=HIGH)
    assert c.attempt("high") == "n1"
    # 1 cpu free; 2 more needed: d, then the older MID (a) are reprieved; the younger MID and LOW go.
    assert c.deleted(2) == ["default/b", "default/c"]


def test_pdb_violating_victims_are_reprieved_first(c: MemCluster) -> None:
    c.informers["poddisruptionbudgets"].put(pdb("guard", 0, {"app": "db"}))
    c.node("n1", cpu="2")
    c.pod("guarded", "1", priority=LOW, node="n1", labels={"app": "db"}, started=10)
    c.pod("plain", "1", priority=LOW, node="n1", started=100)
    c.pod("high", "1", priority=HIGH)
    assert c.attempt("high") == "n1"
    # "plain" is more important (older) but "guarded" would violate its budget: it is reprieved first.
    assert c.deleted(1) == ["default/plain"]


@pytest.mark.parametrize(
    ("allowed", "disrupted", "violations"),
    [
        (1, (), 1),  # two victims, one disruption allowed
        (1, ("other",), 1),  # a disrupted pod that is no victim changes nothing
        (1, ("p1",), 0),  # p1's eviction was processed: only p2 uses the budget
        (0, ("p1",), 1),  # ... but none is left for p2
    ],
)
def test_pdb_violations_are_counted_as_kube_counts_them(
    c: MemCluster, allowed: int, disrupted: tuple[str, ...], violations: int
) -> None:
    c.informers["poddisruptionbudgets"].put(pdb("guard", allowed, {"app": "foo"}, disrupted))
    c.node("n1", cpu="2")
    c.node("n2", cpu="2")
    c.pod("p1", "1", priority=LOW, node="n1", labels={"app": "foo"})
    c.pod("p2", "1", priority=LOW, node="n1", labels={"app": "foo"})
    c.pod("q1", "1", priority=MID, node="n2")
    c.pod("q2", "1", priority=MID, node="n2")
    c.pod("high", "2", priority=HIGH)
    # n2's victims have the higher priority: n1 wins unless its budget is violated.
    assert c.attempt("high") == ("n2" if violations else "n1")


def test_a_budget_with_an_empty_selector_covers_nothing(c: MemCluster) -> None:
    empty = pdb("all", 0, {})
    c.informers["poddisruptionbudgets"].put(empty)
    c.node("n1", cpu="1")
    c.node("n2", cpu="1")
    c.pod("p1", "1", priority=LOW, node="n1", labels={"app": "foo"})
    c.pod("q1", "1", priority=MID, node="n2")
    c.pod("high", "1", priority=HIGH)
    assert c.attempt("high") == "n1"


# ---- choosing the node (pickOneNodeForPreemption) -------------------------------------------------


def _candidate(node: str, prios_starts: list[tuple[int, float]], violations: int = 0) -> Candidate:
    pods = []
    for i, (prio, started) in enumerate(prios_starts):
        stamp = f"2026-01-01T00:{int(started) // 60:02d}:{int(started) % 60:02d}Z"
        pods.append(
            PodInfo(
                {
                    "metadata": {"name": f"{node}-{i}", "namespace": "default", "uid": f"{node}-{i}"},
                    "spec": {"priority": prio},
                    "status": {"startTime": stamp},
                }
            )
        )
    pods.sort(key=lambda p: -p.priority)
    return Candidate(node, Victims(pods, violations))


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        # the fewest PDB violations
        ({"a": ([(LOW, 0)], 1), "b": ([(MID, 0), (MID, 0)], 0)}, "b"),
        # the lowest priority among the most important victims
        ({"a": ([(MID, 0)], 0), "b": ([(LOW, 0), (LOW, 0), (LOW, 0)], 0)}, "b"),
        # same top priority: the smallest sum of priorities
        ({"a": ([(MID, 0), (MID, 0)], 0), "b": ([(MID, 0), (LOW, 0)], 0)}, "b"),
        # negative priorities: shifted before summing, so fewer pods win
        ({"a": ([(-10, 0), (-10, 0)], 0), "b": ([(-10, 0)], 0)}, "b"),
        # same sums: the fewest victims
        ({"a": ([(MID, 0), (LOW, 0), (LOW, 0)], 0), "b": ([(MID, 0), (LOW, 0)], 0)}, "b"),
        # all equal but start times: the latest start among the top-priority victims
        ({"a": ([(MID, 10), (LOW, 50)], 0), "b": ([(MID, 20), (LOW, 5)], 0)}, "b"),
        # ... the earliest of the top-priority victims counts
        ({"a": ([(MID, 30), (MID, 1)], 0), "b": ([(MID, 20), (MID, 20)], 0)}, "b"),
        # complete tie: the first
        ({"a": ([(MID, 0)], 0), "b": ([(MID, 0)], 0)}, "a"),
    ],
)
def test_pick_one_node_for_preemption(candidates: dict[str, Any], want: str) -> None:
    given = [_candidate(node, pods, violations) for node, (pods, violations) in candidates.items()]
    assert pick_one(given, now=1e10).node == want


@pytest.mark.parametrize(("absolute", "want"), [(1, "n1"), (100, "n2")])
def test_dry_run_stops_after_the_candidates_the_args_ask_for(absolute: int, want: str) -> None:
    args = {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": absolute}
    cluster = MemCluster({"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": args}]}]})
    try:
        cluster.node("n1", cpu="1")
        cluster.node("n2", cpu="1")
        cluster.pod("mid", "1", priority=MID, node="n1")
        cluster.pod("low", "1", priority=LOW, node="n2")
        cluster.pod("high", "1", priority=HIGH)

        class StartAtN1:
            def randrange(self, n: int) -> int:
                return [ni.name for ni in cluster.snapshot.node_infos()].index("n1")

        cluster.plugin("DefaultPreemption").rng = StartAtN1()
        # n1 is visited first; one candidate is enough, or else n2 (a lower victim) wins.
        assert cluster.attempt("high") == want
    finally:
        cluster.close()


# ---- args -----------------------------------------------------------------------------------------


def test_args_defaults_and_candidate_count() -> None:
    args = parse_args(None)
    assert args == PreemptionArgs(10, 100)
    assert [args.num_candidates(n) for n in (5, 100, 5000)] == [5, 100, 500]
    assert PreemptionArgs(50, 1).num_candidates(7) == 3


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (
            {"minCandidateNodesPercentage": 101},
            "minCandidateNodesPercentage: Invalid value: 101: not in valid",
        ),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute: Invalid value: -1"),
        (
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        ),
        ({"minCandidateNodes": 1}, "unknown field(s) minCandidateNodes"),
        ({"minCandidateNodesAbsolute": "5"}, "minCandidateNodesAbsolute"),
    ],
)
def test_bad_args_are_refused(raw: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidArgs, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_args(raw)
