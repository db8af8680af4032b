"""LowNodeLoad's usage, thresholds and classes, with hand-computed expectations."""

from __future__ import annotations

from typing import Any

import pytest

from koord.descheduler.plugins.lownodeload.usage import (
    NodeUsage,
    classify,
    complete_thresholds,
    node_usages,
    set_thresholds,
)
from koordshared.apis.meta.quantity import format_time
from tests.support.descheduler import Env, GiB


def measure(env: Env, names: list[str]) -> tuple[list[NodeUsage], dict[str, str]]:
    """The plugin's view of every node from the caches as they are now."""
    return node_usages(
        env.nodes(),
        names,
        node_metric=env.informers.node_metrics.get,
        pods_on_node=lambda n: env.informers.pods.by_index("node", n),
        is_prod=env.plugin.is_prod,
        reported_of=env.plugin.reported,
        now=env.clock.wall(),
        expiration_seconds=env.plugin.args.node_metric_expiration_seconds,
    )


def usages(env: Env, args_pool: int = 0) -> dict[str, Any]:
    """Report, then usage, thresholds and classes as the plugin computes them for a pool."""
    pool = env.plugin.args.pools[args_pool]
    env.report()
    names, pcts = complete_thresholds(
        pool.use_deviation_thresholds, pool.low, pool.high, pool.prod_low, pool.prod_high
    )
    us, skipped = measure(env, names)
    set_thresholds(us, names, pcts, pool.use_deviation_thresholds)
    return {"names": names, "by_name": {u.name: u for u in us}, "skipped": skipped, "classes": classify(us)}


def test_usage_is_system_plus_every_reported_pod_and_prod_is_by_the_pod_object() -> None:
    env = Env({"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}})
    env.node("a", system=(500, 1 * GiB))
    env.pod("ls", "a", 2000, 3 * GiB, labels={"koordinator.sh/priority-class": "koord-prod"})
    env.pod("be", "a", 1500, 2 * GiB, labels={"koordinator.sh/priority-class": "koord-batch"})
    env.pod("quiet", "a", reported=False)  # bound but not in podsMetric: counts as a pod, uses nothing
    u = usages(env)["by_name"]["a"]
    assert u.usage == {"cpu": 4000, "memory": 6 * GiB, "pods": 3}
    assert u.prod_usage == {"cpu": 2000, "memory": 3 * GiB, "pods": 1}


def test_absolute_thresholds_truncate_as_go_does() -> None:
    env = Env({"lowThresholds": {"cpu": 29, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80}})
    env.node("a", cpu="100m", memory="100Gi")
    env.node("b", cpu="10", memory="100Gi")
    got = usages(env)["by_name"]
    # int(29 * 0.01 * 100) is 28 (0.29 * 100 = 28.999999999999996), not 29
    assert got["a"].low["cpu"] == 28
    assert got["a"].high["cpu"] == 75
    assert got["b"].low == {"cpu": 2900, "memory": 59055800320}
    assert got["b"].high == {"cpu": 7500, "memory": 85899345920}
    # no prod thresholds: 100 % of capacity for both prod bounds
    assert got["b"].prod_low == got["b"].prod_high == {"cpu": 10000, "memory": 100 * GiB}


def test_a_resource_missing_from_low_gets_100_percent_for_low_and_high() -> None:
    # memory is always added; a high without a low is overwritten by 100 %
    env = Env({"lowThresholds": {"cpu": 40}, "highThresholds": {"cpu": 60}})
    env.node("a", cpu="10", memory="10Gi")
    got = usages(env)
    assert got["names"] == ["cpu", "memory"]
    u = got["by_name"]["a"]
    assert u.low["memory"] == u.high["memory"] == 10 * GiB


def test_deviation_thresholds_are_around_the_pool_mean() -> None:
    env = Env({"useDeviationThresholds": True, "lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 20}})
    for name, used in (("a", 2000), ("b", 4000), ("c", 9000)):
        env.node(name, cpu="10", memory="100Gi")
        env.pod(f"p-{name}", name, used, 0)
    got = usages(env)
    by = got["by_name"]
    # mean cpu = (20 + 40 + 90) / 3 = 50 %; low = 40 % -> 4000m, high = 70 % -> 7000m
    assert {n: (u.low["cpu"], u.high["cpu"]) for n, u in by.items()} == {
        "a": (4000, 7000),
        "b": (4000, 7000),
        "c": (4000, 7000),
    }
    # memory has no deviation given: both thresholds are the whole capacity
    assert by["a"].low["memory"] == by["a"].high["memory"] == 100 * GiB
    classes = got["classes"]
    assert sorted(u.name for u in classes.source) == ["c"]
    # a (20 %) and b (exactly at 40 %) are under low; no prod thresholds puts them in bothLow
    assert sorted(u.name for u in classes.both_low) == ["a", "b"]


def test_deviation_thresholds_clamp_to_0_and_100() -> None:
    env = Env({"useDeviationThresholds": True, "lowThresholds": {"cpu": 80}, "highThresholds": {"cpu": 90}})
    for name, used in (("a", 5000), ("b", 5000)):
        env.node(name, cpu="10")
        env.pod(f"p-{name}", name, used, 0)
    u = usages(env)["by_name"]["a"]
    assert (u.low["cpu"], u.high["cpu"]) == (0, 10000)  # 50 - 80 -> 0 %, 50 + 90 -> 100 %


@pytest.mark.parametrize(
    ("cpu", "prod_cpu", "unschedulable", "expected"),
    [
        (3000, 3000, False, "prod_high"),  # under low, prod over prodHigh (25 %)
        (3000, 1000, False, "both_low"),  # under low, prod under prodLow (15 %)
        (3000, 2000, False, "low"),  # under low, prod between
        (9000, 9000, False, "source"),  # over high: prod not looked at
        (6000, 3000, False, "prod_high"),  # between, prod over
        (6000, 1000, False, "prod_low"),  # between, prod under
        (6000, 2000, False, "appropriate"),  # between, prod between
        (3000, 1000, True, "appropriate"),  # unschedulable: never low, never prodLow
        (3000, 3000, True, "prod_high"),
    ],
)
def test_classification(cpu: int, prod_cpu: int, unschedulable: bool, expected: str) -> None:
    env = Env(
        {
            "lowThresholds": {"cpu": 40, "memory": 100},
            "highThresholds": {"cpu": 80, "memory": 100},
            "prodLowThresholds": {"cpu": 15, "memory": 100},
            "prodHighThresholds": {"cpu": 25, "memory": 100},
        }
    )
    env.node("n", cpu="10")
    if unschedulable:
        node = dict(env.informers.nodes.get("n") or {})
        node["spec"] = {"unschedulable": True}
        env.informers.nodes.put(node)
    env.pod("prod", "n", prod_cpu, 0, labels={"koordinator.sh/priority-class": "koord-prod"})
    env.pod("batch", "n", cpu - prod_cpu, 0, labels={"koordinator.sh/priority-class": "koord-batch"})
    assert usages(env)["classes"].of("n") == expected


def test_without_prod_thresholds_in_between_nodes_count_as_prod_low() -> None:
    env = Env({"lowThresholds": {"cpu": 40}, "highThresholds": {"cpu": 80}})
    env.node("n", cpu="10")
    env.pod("p", "n", 6000, 0)
    assert usages(env)["classes"].of("n") == "prod_low"


def test_missing_or_expired_node_metrics_leave_the_node_out() -> None:
    env = Env(
        {"lowThresholds": {"cpu": 40}, "highThresholds": {"cpu": 80}, "nodeMetricExpirationSeconds": 60}
    )
    env.node("fresh")
    env.node("never")
    env.node("stale")
    env.report(age=10)
    env.informers.node_metrics.remove("never")
    stale = dict(env.informers.node_metrics.get("stale") or {})
    stale["status"] = {**stale["status"], "updateTime": format_time(env.clock.wall() - 60)}
    env.informers.node_metrics.put(stale)
    us, skipped = measure(env, ["cpu", "memory"])
    assert [u.name for u in us] == ["fresh"]
    assert skipped == {"never": "no NodeMetric", "stale": "NodeMetric expired (older than 60s)"}


def test_a_reported_pod_gone_since_the_report_no_longer_counts() -> None:
    env = Env({"lowThresholds": {"cpu": 45}, "highThresholds": {"cpu": 75}})
    env.node("a")
    env.pod("stays", "a", 2000, 0)
    env.pod("evicted", "a", 3000, 0)
    env.report()  # the NodeMetric still lists "evicted" below
    env.informers.pods.remove("default/evicted")
    (u,), _ = measure(env, ["cpu", "memory"])
    assert u.usage["cpu"] == 2000 and set(u.pod_metrics) == {"default/stays"}
