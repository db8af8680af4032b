"""PodTopologySpread's scores through the real framework, with the numbers of kube-scheduler's
``podtopologyspread`` scoring tests (topology normalizing weights, candidates and ignored nodes, several
constraints), its default constraints (System and List, here by the pod's controller) and its args; and
the same answers from a front end without a snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework import SKIP, CycleState, PodInfo
from koord.scheduler.plugins.podtopologyspread import PodTopologySpread
from koord.scheduler.plugins.podtopologyspread.args import parse_args
from koord.scheduler.testing import SchedulerHarness
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.objects import node
from tests.support.scheduler.inmemory import InMemoryScheduler, only
from tests.unit.koord.scheduler.plugins.podtopologyspread.test_plugin import (
    BAR,
    FOO,
    FOUR,
    HOST,
    NAME,
    NOT_MATCH,
    ZONE,
    cluster,
    incoming,
    placed,
    spread,
    spread_as,
)

__all__ = ["cluster"]  # the fixture


# ---- Score --------------------------------------------------------------------------------------------


def names(letters: str) -> list[str]:
    return [f"node-{n}" for n in letters]


def hosts(letters: str) -> list[dict[str, Any]]:
    return [node(n, labels={HOST: n}) for n in names(letters)]


def soft(skew: int, key: str = HOST, selector: Any = FOO) -> dict[str, Any]:
    return spread(skew, key, selector, "ScheduleAnyway")


@pytest.mark.parametrize(
    ("skew", "counts", "want"),
    [
        (1, "2103", [20, 60, 100, 0]),
        (2, "2103", [33, 66, 100, 16]),
        (3, "4321", [44, 66, 77, 100]),
        (1, "1111", [100, 100, 100, 100]),
    ],
)
def test_score_one_constraint_on_hostname(
    cluster: InMemoryScheduler, skew: int, counts: str, want: list[int]
) -> None:
    cluster.add(*hosts("abcd"), *spread_as(counts, "abcd"))
    assert cluster.scores(incoming(soft(skew)), NAME) == dict(zip(names("abcd"), want, strict=True))


def test_score_null_selector_and_single_candidate(cluster: InMemoryScheduler) -> None:
    cluster.add(*hosts("abcd"), *spread_as("2103", "abcd"))
    assert set(cluster.scores(incoming(soft(1, selector=None)), NAME).values()) == {100}
    assert cluster.scores(incoming(soft(1)), NAME, ["node-a"]) == {"node-a": 100}


def test_score_counts_domains_of_the_candidates_only(cluster: InMemoryScheduler) -> None:
    # 4/2/1/(3): node-y is not a candidate
    cluster.add(*hosts("abxy"), *spread_as("4213"))
    assert cluster.scores(incoming(soft(1)), NAME, ["node-a", "node-b", "node-x"]) == {
        "node-a": 33,
        "node-b": 83,
        "node-x": 100,
    }


def test_score_ignores_a_candidate_without_the_key(cluster: InMemoryScheduler) -> None:
    nodes = hosts("abxy")
    nodes[1] = node("node-b", labels={"n": "node-b"})
    cluster.add(*nodes, *spread_as("4213"))
    assert cluster.scores(incoming(soft(1)), NAME, ["node-a", "node-b", "node-x"]) == {
        "node-a": 16,
        "node-b": 0,
        "node-x": 100,
    }


def test_score_on_zones(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR, *spread_as("4213"))
    candidates = ["node-a", "node-b", "node-x"]
    assert cluster.scores(incoming(soft(1, ZONE)), NAME, candidates) == {
        "node-a": 75,
        "node-b": 75,
        "node-x": 100,
    }


def test_score_two_constraints_two_candidates(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR, *spread_as("2124"))
    two = incoming(soft(1, ZONE), soft(1, HOST))
    assert cluster.scores(two, NAME, ["node-a", "node-x"]) == {"node-a": 100, "node-x": 63}


def test_score_two_constraints_with_different_selectors(cluster: InMemoryScheduler) -> None:
    cluster.add(
        *FOUR,
        placed("a1", "node-a", labels={"foo": ""}),
        placed("b1", "node-b", labels={"foo": "", "bar": ""}),
        placed("y1", "node-y", labels={"foo": ""}),
        placed("y2", "node-y", labels={"bar": ""}),
    )
    p = incoming(soft(1, ZONE, FOO), soft(1, HOST, BAR), labels={"foo": "", "bar": ""})
    assert cluster.scores(p, NAME) == dict(zip(names("abxy"), [60, 20, 100, 60], strict=True))


def test_a_pod_without_soft_constraints_is_not_scored(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR, *spread_as("2103"))
    assert cluster.scores(incoming(spread(1, ZONE)), NAME) == {}


# ---- default constraints ---------------------------------------------------------------------------------


def owned(p: dict[str, Any], kind: str = "ReplicaSet", uid: str = "rs-1") -> dict[str, Any]:
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": kind, "name": "web", "uid": uid, "controller": True}
    ]
    return p


def test_system_defaults_spread_the_pods_of_one_controller_by_hostname(cluster: InMemoryScheduler) -> None:
    # nodes without a zone label still get hostname spreading under the System defaults
    cluster.add(*hosts("abcd"))
    cluster.add(*[owned(p) for p in spread_as("4321", "abcd")])
    cluster.add(owned(placed("other-owner", "node-d"), uid="rs-2"), placed("no-owner", "node-d"))
    p = owned(incoming())
    assert cluster.scores(p, NAME) == dict(zip(names("abcd"), [44, 66, 77, 100], strict=True))
    plugin = cluster.framework.instances[NAME]
    assert plugin.pre_filter(CycleState(PodInfo(p)), p) is SKIP  # the defaults are ScheduleAnyway
    assert cluster.scores(incoming(), NAME) == {}  # no controller: no defaults
    assert cluster.scores(owned(incoming(), kind="Job"), NAME) == {}  # not a kind kube-scheduler looks at


def test_list_defaults_filter_with_the_controller_selector() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
    }
    with InMemoryScheduler(only(NAME, args={NAME: args})) as s:
        s.add(*FOUR, *[owned(p) for p in spread_as("1100")])
        assert s.filter(owned(incoming())) == {
            "node-a": NOT_MATCH,
            "node-b": NOT_MATCH,
            "node-x": "",
            "node-y": "",
        }
        assert set(s.filter(owned(incoming(), uid="rs-2")).values()) == {""}
        # a pod with constraints of its own does not get the defaults
        assert set(s.filter(owned(incoming(spread(1, ZONE, BAR)))).values()) == {""}


def test_args() -> None:
    assert parse_args(None).system_defaulted
    assert len(parse_args({}).defaults) == 2
    listed = parse_args({"defaultingType": "List"})
    assert listed.defaults == ()
    good = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
    bad: list[tuple[dict[str, Any], str]] = [
        ({"defaultConstraints": [good]}, "defaultingType"),  # System with constraints
        ({"defaultingType": "Sometimes"}, "defaultingType"),
        ({"defaultingType": "List", "defaultConstraints": [{**good, "maxSkew": 0}]}, "maxSkew"),
        ({"defaultingType": "List", "defaultConstraints": [{**good, "topologyKey": ""}]}, "topologyKey"),
        (
            {"defaultingType": "List", "defaultConstraints": [{**good, "whenUnsatisfiable": "Never"}]},
            "whenUnsatisfiable",
        ),
        ({"defaultingType": "List", "defaultConstraints": [{**good, "labelSelector": {}}]}, "labelSelector"),
        ({"defaultingType": "List", "defaultConstraints": [good, good]}, "Duplicate"),
        ({"defaultingType": "List", "defaultConstraints": [{**good, "maxSkw": 1}]}, "maxSkw"),
        ({"hardPodAffinityWeight": 1}, "hardPodAffinityWeight"),
    ]
    for raw, field in bad:
        with pytest.raises(InvalidArgs, match=field):
            PodTopologySpread(raw, None)


def test_a_front_end_without_a_snapshot_gets_the_same_answers() -> None:
    """The extender's handle has no snapshot and NodeInfos without pods: the plugin builds one."""
    kit = SchedulerHarness(
        {"plugins": {"multiPoint": {"enabled": [{"name": NAME}], "disabled": [{"name": "*"}]}}}
    )
    for n in FOUR:
        kit.nodes.put(n)
    for p in spread_as("2103"):
        kit.pods.put(p)
    assert [n for n, why in kit.filter(incoming(spread(1, "node"))).items() if not why] == ["node-x"]
    assert kit.explain(incoming(soft(1, "node")), "node-x")["scores"] == {NAME: 100}
    assert kit.explain(incoming(soft(1, "node")), "node-y")["scores"] == {NAME: 0}
