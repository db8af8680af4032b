"""ElasticQuota's preemption through koord-scheduler's real core with the API's answers fed back
(tests.support.scheduler.memcluster): victims only from the preemptor's quota and of lower priority, never a
non-preemptible pod nor (by default) a default-quota pod, the quota checked along with the node, no
preemption outside a full quota; DefaultPreemption after it only for pods refused by the nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koord.scheduler.plugins.elasticquota import NAME
from koordshared.apis.extension import elasticquota as eq
from koordshared.testing import objects
from koordshared.testing.objects import elastic_quota
from tests.support.scheduler.memcluster import SCHEDULER, MemCluster, wait_for

LOW, MID, HIGH = 0, 5, 10
NO_VICTIMS = "preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod."


def config(post: list[str], args: dict[str, Any] | None = None) -> dict[str, Any]:
    profile: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "plugins": {
            "multiPoint": {"enabled": [{"name": NAME}]},
            "postFilter": {"disabled": [{"name": "*"}], "enabled": [{"name": n} for n in post]},
        },
    }
    if args:
        profile["pluginConfig"] = [{"name": NAME, "args": args}]
    return {"profiles": [profile]}


KOORDINATOR = [NAME, "DefaultPreemption"]
"""Koordinator's shipped postFilter order (less Reservation and Coscheduling)."""


@pytest.fixture
def c() -> Iterator[MemCluster]:
    cluster = MemCluster(config(KOORDINATOR))
    yield cluster
    cluster.close()


def quota(c: MemCluster, name: str, **kw: Any) -> None:
    c.informers["elasticquotas"].put(elastic_quota(name, **kw))


def in_quota(q: str, **labels: str) -> dict[str, Any]:
    return {"labels": {eq.LABEL_QUOTA_NAME: q, **labels}}


FIXED = {eq.LABEL_PREEMPTIBLE: "false"}


def test_a_pod_refused_by_its_quota_preempts_the_least_important_pod_of_that_quota(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    quota(c, "a", maximum={"cpu": "2"})
    quota(c, "b", maximum={"cpu": "2"})
    c.pod("a-low", "1", priority=LOW, node="n1", **in_quota("a"))
    c.pod("a-mid", "1", priority=MID, node="n1", **in_quota("a"))
    c.pod("b-low", "1", priority=LOW, node="n1", **in_quota("b"))
    c.pod("high", "1", priority=HIGH, **in_quota("a"))
    # a asks 3, capped at its max 2: runtime 2, used 2. Taking a-low leaves room for one more.
    assert c.attempt("high") == "n1"
    assert c.deleted(1) == ["default/a-low"]
    assert c.failed_scheduling("high").startswith(
        "0/1 nodes are available: Insufficient quotas, quotaName: a"
    )
    c.schedule()
    assert wait_for(lambda: c.node_of("high")) == "n1"
    assert c.api.deleted == ["default/a-low"]


def test_the_node_chosen_is_one_whose_victims_bring_the_quota_within_its_limit(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    c.node("n2", cpu="4")
    quota(c, "a", maximum={"cpu": "2"})
    # a holds 3 (placed beside this scheduler): 1 on n1, 2 on n2; its limit is 2.
    c.pod("a-n1", "1", priority=LOW, node="n1", **in_quota("a"))
    c.pod("a-n2", "2", priority=LOW, node="n2", **in_quota("a"))
    c.pod("high", "1", priority=HIGH, **in_quota("a"))
    # n1 has room on the node, but without a-n1 the quota still holds 2 + 1 > 2: only n2 helps.
    assert c.attempt("high") == "n2"
    assert c.deleted(1) == ["default/a-n2"]


def test_no_pod_of_another_quota_and_no_non_preemptible_pod_is_a_victim(c: MemCluster) -> None:
    c.node("n1", cpu="4")
    quota(c, "a", maximum={"cpu": "2"})
    quota(c, "b", maximum={"cpu": "2"})
    c.pod("a-fixed", "2", priority=LOW, node="n1", **in_quota("a", **FIXED))
    c.pod("b-low", "2", priority=LOW, node="n1", **in_quota("b"))
    c.pod("high", "1", priority=HIGH, **in_quota("a"))
    assert c.attempt("high") == ""
    message = c.failed_scheduling("high")
    assert message.endswith(" " + NO_VICTIMS.format(n=1))
    # The quota is full: ElasticQuota's answer is final, DefaultPreemption does not try b's pod.
    assert c.api.deleted == []
    assert c.metric("scheduler_preemption_attempts_total") == 1


def test_default_quota_pods_are_spared_unless_asked() -> None:
    for spare, deleted in ((True, []), (False, ["default/d-low"])):
        c = MemCluster(
            config(
                KOORDINATOR, {"defaultQuotaGroupMax": {"cpu": "1"}, "disableDefaultQuotaPreemption": spare}
            )
        )
        try:
            c.node("n1", cpu="4")
            c.pod("d-low", "1", priority=LOW, node="n1")
            c.pod("d-high", "1", priority=HIGH)
            c.attempt("d-high")
            if deleted:
                assert c.deleted(1) == deleted
            else:
                assert NO_VICTIMS.format(n=1) in c.failed_scheduling("d-high")
                assert c.api.deleted == []
        finally:
            c.close()


def tainted(c: MemCluster, name: str, cpu: str) -> None:
    """A node no pod here tolerates: its cpu counts in the quotas' total, yet no pod lands there."""
    obj = objects.node(name, cpu)
    obj["spec"]["taints"] = [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]
    c.nodes.put(obj)


def test_a_pod_refused_by_the_nodes_preempts_inside_its_quota_first(c: MemCluster) -> None:
    c.node("n1", cpu="2")
    tainted(c, "elsewhere", "16")
    quota(c, "a", maximum={"cpu": "4"})
    quota(c, "b", maximum={"cpu": "4"})
    c.pod("a-low", "1", priority=LOW, node="n1", **in_quota("a"))
    c.pod("b-lower", "1", priority=LOW - 1, node="n1", **in_quota("b"))
    c.pod("high", "1", priority=HIGH, **in_quota("a"))
    # The quota has room; the node has none. kube would take b-lower (lowest priority); ElasticQuota
    # takes a-low, and DefaultPreemption is not asked.
    assert c.attempt("high") == "n1"
    assert c.deleted(1) == ["default/a-low"]
    assert c.failed_scheduling("high").startswith("0/2 nodes are available: 1 Insufficient cpu, ")


def test_only_with_default_preemption_after_it_may_a_pod_refused_by_the_nodes_preempt_elsewhere() -> None:
    for post, deleted in ((KOORDINATOR, ["default/b-low"]), ([NAME], [])):
        c = MemCluster(config(post))
        try:
            c.node("n1", cpu="2")
            tainted(c, "elsewhere", "16")
            quota(c, "a", maximum={"cpu": "4"})
            quota(c, "b", maximum={"cpu": "4"})
            c.pod("a-fixed", "1", priority=LOW, node="n1", **in_quota("a", **FIXED))
            c.pod("b-low", "1", priority=LOW, node="n1", **in_quota("b"))
            c.pod("high", "1", priority=HIGH, **in_quota("a"))
            c.attempt("high")
            if deleted:
                assert c.deleted(1) == deleted  # kube's preemption, across quotas
            else:
                c.failed_scheduling("high")
                assert c.api.deleted == []
        finally:
            c.close()
