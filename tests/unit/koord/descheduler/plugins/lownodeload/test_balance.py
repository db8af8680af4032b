"""LowNodeLoad rounds end to end over in-memory caches: anomaly counting, targets and their capacity,
the eviction order and the stop condition, with hand-computed expectations."""

from __future__ import annotations

from typing import Any, TypedDict

from koord.descheduler.framework.runtime import RoundLimits
from tests.support.descheduler import Env, GiB

ONE_ROUND = {"anomalyCondition": {"consecutiveAbnormalities": 1}}
CPU = {"lowThresholds": {"cpu": 45, "memory": 100}, "highThresholds": {"cpu": 75, "memory": 100}}
BATCH = {"koordinator.sh/priority-class": "koord-batch"}


class _PodKw(TypedDict):
    labels: dict[str, str]
    priority: int


def hot_and_cold(args: dict[str, Any]) -> Env:
    """hot: 10 cores, 9 pods of 1000m (90 %); cold-1, cold-2: 10 cores at 10 %."""
    env = Env(args)
    env.node("hot")
    for i in range(9):
        env.pod(f"be-{i}", "hot", 1000, 0, labels=BATCH)
    for cold in ("cold-1", "cold-2"):
        env.node(cold)
        env.pod(f"{cold}-app", cold, 1000, 0)
    return env


def test_anomaly_needs_six_rounds_over_the_threshold_at_the_default_five() -> None:
    env = hot_and_cold(CPU)
    for n in range(1, 6):
        assert env.round() == [], f"round {n} evicted"
        assert env.plugin.node_detectors.count("hot") == n
    evicted = env.round()
    assert evicted, "the sixth round over the threshold evicts"


def test_consecutive_means_consecutive_a_round_under_the_threshold_restarts_the_count() -> None:
    env = hot_and_cold(CPU)
    for _ in range(5):
        assert env.round() == []
    # one round in which hot is under its high threshold (a NodeMetric reporting less)
    saved = dict(env.usage["hot"])
    env.usage["hot"] = {k: (100, 0) for k in saved}
    assert env.round() == []
    assert env.plugin.node_detectors.count("hot") == 0
    env.usage["hot"] = saved
    for _ in range(5):
        assert env.round() == []
    assert env.round(), "six consecutive rounds again"


def test_anomaly_lasts_its_timeout_then_the_count_starts_over() -> None:
    env = hot_and_cold({**CPU, "anomalyCondition": {"timeout": "30s"}})
    # nothing can be evicted, so nothing brings the node under its threshold (which would reset it)
    env.recorder.unevictable = {f"default/be-{i}" for i in range(9)}
    for _ in range(5):
        env.round()
    env.round()  # the sixth, at T: Anomaly until T+30 (each round ends with the clock 10 s later)
    assert env.plugin.node_detectors.state("hot") == "Anomaly"
    env.round()  # at T+10: further abnormal marks do not extend it
    env.round()  # at T+20
    assert env.plugin.node_detectors.state("hot") == "Anomaly"  # at T+30: not past it yet
    env.round()  # at T+30: still Anomaly when marked
    assert env.plugin.node_detectors.state("hot") == "OK"  # at T+40: past it, counters cleared
    assert env.plugin.node_detectors.count("hot") == 0
    env.round()
    assert env.plugin.node_detectors.count("hot") == 1
    assert env.plugin.node_detectors.state("hot") == "OK"


def test_evicts_until_the_source_is_under_its_high_threshold_then_resets_its_detector() -> None:
    env = hot_and_cold({**CPU, **ONE_ROUND})
    evicted = env.round()
    # 9000m over 7500m: after two pods of 1000m it is at 7000m; the next check finds it under and stops
    assert len(evicted) == 2
    assert (
        env.recorder.evicted[-1][2].reason == "node is overutilized, node cpu usage(80.00%)>threshold(75.00%)"
    )
    assert env.plugin.node_detectors.count("hot") == 0


def test_the_eviction_reason_names_every_resource_over_its_threshold() -> None:
    env = Env(
        {
            "lowThresholds": {"cpu": 45, "memory": 50},
            "highThresholds": {"cpu": 75, "memory": 80},
            **ONE_ROUND,
            "nodeFit": False,
        }
    )
    env.node("hot", memory="10Gi")
    env.pod("p", "hot", 8120, 9 * GiB, labels=BATCH, owner_kind="ReplicaSet")
    env.node("cold", memory="10Gi")
    env.round()
    assert env.recorder.evicted[0][2].reason == (
        "node is overutilized, node cpu usage(81.20%)>threshold(75.00%), "
        "node memory usage(90.00%)>threshold(80.00%)"
    )


def test_target_capacity_bounds_the_evictions() -> None:
    # source: 40 cores, high 75 % = 30000m, using 39000m (nine 4000m pods + 3000m system)
    # target: 10 cores, high 7500m, using 1500m: 6000m to take
    args = {**CPU, **ONE_ROUND, "nodeFit": False}
    env = Env(args)
    env.node("hot", cpu="40", system=(3000, 0))
    for i in range(9):
        env.pod(f"p{i}", "hot", 4000, 0, labels=BATCH)
    env.node("cold", cpu="10")
    env.pod("cold-app", "cold", 1500, 0)
    # two pods: 6000 - 4000 = 2000 left > 0, then -2000: stop, the source still at 31000m (over)
    assert len(env.round()) == 2


def test_node_fit_adds_each_evicted_pod_to_its_target() -> None:
    env = Env({**CPU, **ONE_ROUND})
    env.node("hot", cpu="40", system=(3000, 0))
    for i in range(9):
        env.pod(f"p{i}", "hot", 4000, 0, labels=BATCH)
    env.node("cold", cpu="10")
    env.pod("cold-app", "cold", 1500, 0)
    # the first eviction takes the target to 5500m; every later pod would exceed 7500m there: it stays
    assert len(env.round()) == 1


def test_targets_fill_with_real_moves_only() -> None:
    # two sources of 40 cores at 39000m (high 30000m), nine 4000m pods each; one target of 20 cores at
    # 5000m (high 15000m): room for two such pods. One eviction per node per round (round limit).
    env = Env({**CPU, **ONE_ROUND}, limits=RoundLimits(per_node=1))
    for src in ("hot-a", "hot-b"):
        env.node(src, cpu="40", system=(3000, 0))
        for i in range(9):
            env.pod(f"{src}-{i}", src, 4000, 0, labels=BATCH)
    env.node("cold", cpu="20")
    env.pod("cold-app", "cold", 5000, 0)
    # Koordinator would reserve the target for hot-a's first two candidates while listing them, evict
    # one (the limit), and find no room left for hot-b: one move. Here both sources move one pod.
    evicted = env.round()
    assert sorted(k.split("/")[1].rsplit("-", 1)[0] for k in evicted) == ["hot-a", "hot-b"]


def test_no_target_nodes_no_eviction() -> None:
    env = Env({**CPU, **ONE_ROUND})
    for name in ("hot-1", "hot-2"):
        env.node(name)
        env.pod(f"{name}-p", name, 9000, 0, labels=BATCH)
    assert env.round() == []


def test_number_of_nodes_and_all_under_used() -> None:
    env = hot_and_cold({**CPU, **ONE_ROUND, "numberOfNodes": 2})
    assert env.round() == [], "two under-used nodes are not more than numberOfNodes=2"
    env2 = Env({**CPU, **ONE_ROUND})
    for name in ("a", "b"):
        env2.node(name)
        env2.pod(f"{name}-p", name, 1000, 0)
    assert env2.round() == []


def test_pod_order() -> None:
    from koord.descheduler.plugins.lownodeload.sorter import sort_pods
    from tests.unit.koord.descheduler.plugins.lownodeload.test_usage import usages

    env = Env({"lowThresholds": {"cpu": 30, "memory": 100}, "highThresholds": {"cpu": 40, "memory": 100}})
    env.node("hot", cpu="100")
    free = {"koordinator.sh/priority-class": "koord-free"}
    mid = {"koordinator.sh/priority-class": "koord-mid"}
    prod = {"koordinator.sh/priority-class": "koord-prod"}
    same: _PodKw = {"labels": BATCH, "priority": 5000}
    env.pod("prod", "hot", 2000, 0, labels=prod)
    env.pod("mid", "hot", 2000, 0, labels=mid)
    env.pod("free", "hot", 2000, 0, labels=free)
    env.pod("batch-5100", "hot", 2000, 0, labels=BATCH, priority=5100)
    guaranteed = {"cpu": "1", "memory": "1Gi"}
    env.pod("guaranteed", "hot", 2000, 0, requests=guaranteed, limits=guaranteed, **same)
    env.pod("qos-ls", "hot", 2000, 0, labels={**BATCH, "koordinator.sh/qosClass": "LS"}, priority=5000)
    env.pod(
        "deletion-cost-9",
        "hot",
        2000,
        0,
        annotations={"controller.kubernetes.io/pod-deletion-cost": "9"},
        **same,
    )
    env.pod(
        "eviction-cost-1",
        "hot",
        2000,
        0,
        annotations={"scheduling.koordinator.sh/eviction-cost": "1"},
        **same,
    )
    # the node uses 47000m of 100000m with a 40000m threshold: excess 7000m
    env.pod("fit-exact", "hot", 7000, 0, **same)  # ratio 1: score 2
    env.pod("fit-double", "hot", 14000, 0, **same)  # ratio 2: 1/2 + 1 = 1.5
    env.pod("fit-half", "hot", 3500, 0, **same)  # ratio 0.5: 0.5
    env.pod("unreported", "hot", **same, reported=False)
    env.pod("old", "hot", 0, 0, **same, created=1_500_000_000)  # ratio 0, the oldest of the two
    env.pod("new", "hot", 0, 0, **same, created=1_700_000_000)
    env.pod("filler", "hot", 6500, 0, labels=prod, priority=9500)
    node = usages(env)["by_name"]["hot"]
    assert node.usage["cpu"] == 47000
    pods = list(env.informers.pods.by_index("node", "hot"))
    facts = {f"default/{p['metadata']['name']}": env.plugin.facts(p) for p in pods}
    sort_pods(pods, facts, node, {"cpu": 1, "memory": 1}, prod=False)
    assert [p["metadata"]["name"] for p in pods] == [
        "free",  # koord-free before koord-batch
        "fit-exact",  # then, same class, priority, QoS and costs: the best usage fit first
        "fit-double",
        "fit-half",
        "new",  # equal fit (0): newest first
        "old",
        "unreported",  # no reported usage: last of its rank
        "eviction-cost-1",  # eviction cost 1 after 0
        "deletion-cost-9",  # deletion cost ranks before the eviction cost
        "qos-ls",  # koord QoS LS after BE
        "guaranteed",  # Guaranteed after BestEffort
        "batch-5100",  # higher spec.priority later
        "mid",
        "prod",
        "filler",
    ]


def test_dry_run_decides_the_same_and_evicts_nothing() -> None:
    real = hot_and_cold({**CPU, **ONE_ROUND})
    dry = hot_and_cold({**CPU, **ONE_ROUND, "dryRun": True})
    real_evicted = real.round()
    dry_evicted = dry.round()
    assert dry_evicted == real_evicted and dry_evicted
    assert all(o.dry_run for _, _, o in dry.recorder.evicted)
    assert len(dry.informers.pods.by_index("node", "hot")) == 9


def test_refused_pods_are_skipped_and_the_round_goes_on() -> None:
    env = hot_and_cold({**CPU, **ONE_ROUND})
    env.recorder.refuse = {"default/be-8", "default/be-7"}  # the newest two would go first
    evicted = env.round()
    assert "default/be-8" not in evicted and "default/be-7" not in evicted
    assert len(evicted) == 2
    assert ("pdb", "hot") in env.counter.results


def test_round_limits_cap_evictions_per_node() -> None:
    env = Env({**CPU, **ONE_ROUND, "nodeFit": False}, limits=RoundLimits(per_node=1))
    env.node("hot")
    for i in range(9):
        env.pod(f"be-{i}", "hot", 1000, 0, labels=BATCH)
    env.node("cold")
    assert len(env.round()) == 1
