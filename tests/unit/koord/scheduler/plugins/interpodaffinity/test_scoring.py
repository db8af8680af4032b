"""InterPodAffinity's scores through the real framework, with kube-scheduler's ``interpodaffinity``
scoring cases (preferred terms of the pod, per topology domain, affinity and anti-affinity together,
existing pods' required and preferred terms, ``hardPodAffinityWeight``,
``ignorePreferredTermsOfExistingPods``), its args, and the same answers from a front end without a
snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from koord.scheduler.plugins.interpodaffinity import InterPodAffinity
from koord.scheduler.testing import SchedulerHarness
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.objects import node
from tests.support.scheduler.inmemory import InMemoryScheduler, only
from tests.unit.koord.scheduler.plugins.interpodaffinity.test_plugin import (
    ANTI,
    HOST,
    NAME,
    cluster,
    expr,
    incoming,
    placed,
    term,
)

__all__ = ["cluster"]  # the fixture


# ---- Score --------------------------------------------------------------------------------------------


S1, S2 = {"security": "S1"}, {"security": "S2"}


def with_s(value: str, key: str) -> dict[str, Any]:
    return term(key, expr("security", "In", value))


def regions(*labels: Mapping[str, str]) -> list[dict[str, Any]]:
    return [node(f"node{i + 1}", labels=dict(lb)) for i, lb in enumerate(labels)]


CHINA, INDIA, AZ1 = {"region": "China"}, {"region": "India"}, {"az": "az1"}


def test_score_preferred_affinity(cluster: InMemoryScheduler) -> None:
    cluster.add(*regions(CHINA, INDIA, AZ1))
    cluster.add(placed("a", "node1", S1), placed("b", "node2", S2), placed("c", "node3", S1))
    p = incoming(S1, preferred=[(5, with_s("S1", "region"))])
    assert cluster.scores(p, NAME) == {"node1": 100, "node2": 0, "node3": 0}


def test_score_is_per_domain(cluster: InMemoryScheduler) -> None:
    cluster.add(*regions(CHINA, {"region": "China", "az": "az1"}, INDIA), placed("a", "node1", S1))
    p = incoming(preferred=[(5, with_s("S1", "region"))])
    assert cluster.scores(p, NAME) == {"node1": 100, "node2": 100, "node3": 0}


def test_score_the_region_with_more_matches_wins(cluster: InMemoryScheduler) -> None:
    cluster.add(*regions(CHINA, INDIA, CHINA, CHINA, INDIA))
    cluster.add(
        *[
            placed(f"s{i}", n, S2)
            for i, n in enumerate(["node1", "node1", "node2", "node3", "node4", "node5"])
        ]
    )
    p = incoming(S1, preferred=[(6, with_s("S2", "region"))])
    assert cluster.scores(p, NAME) == {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}


def test_score_affinity_and_anti_affinity_together(cluster: InMemoryScheduler) -> None:
    cluster.add(
        *regions(
            {"region": "China", "az": "az1"},
            {"region": "China", "az": "az2"},
            {"region": "India", "az": "az1"},
        )
    )
    cluster.add(placed("a", "node1", S1), placed("b", "node3", S2))
    p = incoming(preferred=[(8, with_s("S1", "region"))], preferred_anti=[(5, with_s("S2", "az"))])
    # node1: China +8, az1 -5 = 3; node2: China +8 = 8; node3: India 0, az1 -5 = -5
    assert cluster.scores(p, NAME) == {"node1": 61, "node2": 100, "node3": 0}


def test_score_preferred_anti_affinity(cluster: InMemoryScheduler) -> None:
    cluster.add(*regions({"az": "az1"}, {"az": "az2"}), placed("a", "node1", S1))
    assert cluster.scores(incoming(S1, preferred_anti=[(5, with_s("S1", "az"))]), NAME) == {
        "node1": 0,
        "node2": 100,
    }


def test_score_existing_pods_terms_and_hard_weight() -> None:
    def scores(args: dict[str, Any] | None = None) -> dict[str, int]:
        with InMemoryScheduler(only(NAME, args={NAME: args or {}})) as s:
            s.add(*regions(CHINA, INDIA, {"region": "Japan"}))
            s.add(
                placed("hard", "node1", S2, required=[with_s("S1", "region")]),
                placed("soft", "node2", S2, preferred=[(3, with_s("S1", "region"))]),
                placed("avoid", "node3", S2, preferred_anti=[(2, with_s("S1", "region"))]),
            )
            return s.scores(incoming(S1), NAME)

    # China +1 (hardPodAffinityWeight 1), India +3, Japan -2: min -2, max 3
    assert scores() == {"node1": 60, "node2": 100, "node3": 0}
    assert scores({"hardPodAffinityWeight": 5}) == {"node1": 100, "node2": 71, "node3": 0}
    assert scores({"hardPodAffinityWeight": 0}) == {"node1": 40, "node2": 100, "node3": 0}
    # existing pods' preferences ignored for a pod without preferences of its own: not scored at all
    assert scores({"ignorePreferredTermsOfExistingPods": True}) == {}


def test_a_pod_nothing_prefers_is_not_scored(cluster: InMemoryScheduler) -> None:
    cluster.add(*regions(CHINA, INDIA), placed("a", "node1", S1))
    assert cluster.scores(incoming(S1), NAME) == {}


def test_args() -> None:
    for raw, field in (
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": "1"}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"defaultingType": "List"}, "defaultingType"),
    ):
        with pytest.raises(InvalidArgs, match=field):
            InterPodAffinity(raw, None)
    plugin = InterPodAffinity(None, None)
    assert (plugin.hard_weight, plugin.ignore_existing_preferred) == (1, False)


def test_a_front_end_without_a_snapshot_gets_the_same_answers() -> None:
    """The extender's handle has no snapshot and NodeInfos without pods: the plugin builds one."""
    kit = SchedulerHarness(
        {"plugins": {"multiPoint": {"enabled": [{"name": NAME}], "disabled": [{"name": "*"}]}}}
    )
    for n in ("a", "b"):
        kit.nodes.put(node(n, labels={HOST: n, "zone": "z1" if n == "a" else "z2"}))
    kit.pods.put(placed("w", "a", {"app": "web"}))
    p = incoming({"app": "web"}, anti=[term(HOST, expr("app", "In", "web"))])
    assert kit.filter(p) == {"a": ANTI, "b": ""}
    near = incoming(preferred=[(5, term("zone", expr("app", "In", "web")))])
    assert kit.explain(near, "a")["scores"] == {NAME: 100}
    assert kit.explain(near, "b")["scores"] == {NAME: 0}
