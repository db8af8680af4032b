"""LoadAware filter decisions computed by hand from Koordinator's ``load_aware.go`` ``Filter``: thresholds
with the incoming pod's estimate, Go rounding, prod and batch pods, expired and missing NodeMetrics, node
annotations, aggregated thresholds, DaemonSet pods."""

from __future__ import annotations

import json
from typing import Any

from koord.scheduler.framework import Code
from koordshared.testing.objects import GiB, pod
from tests.support.scheduler.env import Env

BE = pod("be")  # BestEffort: batch, estimated 250m / 200Mi
PROD_2CPU = pod("prod", requests={"cpu": "2", "memory": "1Gi"}, limits={"cpu": "2", "memory": "1Gi"})  # 1700m


def one_node(args: dict[str, Any] | None = None, **metric: int) -> Env:
    env = Env(args)
    env.add_node("n")
    env.report("n", **metric)
    return env


def test_threshold_with_incoming_estimate_and_go_rounding() -> None:
    # default thresholds cpu 65 %, memory 95 %; node 16 cores
    assert one_node(cpu_milli=9600).filter(BE, "n") is None  # (9600+250)/16000 = 61.6 % -> 62
    assert one_node(cpu_milli=9600).reason(PROD_2CPU, "n") == "node(s) cpu usage exceed threshold"  # 70.6 %
    assert one_node(cpu_milli=10214).filter(BE, "n") is None  # 10464/16000 = 65.4 % -> 65, not > 65
    st = one_node(cpu_milli=10230).filter(BE, "n")  # 10480/16000 = 65.5 % -> rounds half up to 66
    assert st is not None and st.code is Code.UNSCHEDULABLE


def test_memory_threshold_and_first_failing_resource() -> None:
    mem = int(0.953 * 64 * GiB)  # 95.3 %; + 200Mi (0.3 %) = 95.6 % -> 96 > 95
    assert one_node(memory_bytes=mem).reason(BE, "n") == "node(s) memory usage exceed threshold"
    # both over: cpu is reported (vectorizer order: cpu before memory)
    assert one_node(cpu_milli=16000, memory_bytes=mem).reason(BE, "n") == "node(s) cpu usage exceed threshold"


def test_zero_threshold_disables_the_resource_and_all_zero_disables_the_filter() -> None:
    assert one_node({"usageThresholds": {"cpu": 0, "memory": 95}}, cpu_milli=16000).filter(BE, "n") is None
    shipped = {"usageThresholds": {"cpu": 0, "memory": 0}}  # Koordinator's shipped profile
    assert one_node(shipped, cpu_milli=16000, memory_bytes=64 * GiB).filter(BE, "n") is None


def test_missing_and_empty_node_metric_pass() -> None:
    env = Env()
    env.add_node("bare")
    assert env.filter(PROD_2CPU, "bare") is None
    env.add_node("empty")
    env.report("empty", with_node_metric=False)
    assert env.filter(PROD_2CPU, "empty") is None


def test_expired_node_metric_three_ways() -> None:
    # default: filterExpiredNodeMetrics true, 180 s, not schedulable when expired
    assert one_node(age=181).reason(BE, "n") == "node(s) nodeMetric expired"
    assert one_node(age=180).reason(BE, "n") == "node(s) nodeMetric expired"  # age >= expiration
    assert one_node(age=179).filter(BE, "n") is None
    env = Env()
    env.add_node("n")
    env.metrics.put({"metadata": {"name": "n"}, "status": {"nodeMetric": {}}})  # never stamped
    assert env.reason(BE, "n") == "node(s) nodeMetric expired"
    # allowed when expired: the load check is skipped, however high the stale load
    lenient = {"enableScheduleWhenNodeMetricsExpired": True}
    assert one_node(lenient, age=500, cpu_milli=16000).filter(BE, "n") is None
    # expiry not filtered: the stale metric is used as if fresh
    stale_ok = {"filterExpiredNodeMetrics": False}
    assert one_node(stale_ok, age=500, cpu_milli=1000).filter(BE, "n") is None
    assert (
        one_node(stale_ok, age=500, cpu_milli=16000).reason(BE, "n") == "node(s) cpu usage exceed threshold"
    )


def test_daemonset_pods_pass_everywhere() -> None:
    ds = pod("ds", owner_kind="DaemonSet", requests={"cpu": "4"})
    assert one_node(cpu_milli=16000).filter(ds, "n") is None
    assert one_node(age=999).filter(ds, "n") is None
    rs = pod("rs", owner_kind="ReplicaSet")
    assert one_node(cpu_milli=16000).filter(rs, "n") is not None


def test_node_annotation_overrides_thresholds() -> None:
    env = Env()
    env.add_node(
        "strict",
        annotations={
            "scheduling.koordinator.sh/usage-thresholds": json.dumps({"usageThresholds": {"cpu": 50}})
        },
    )
    env.add_node("broken", annotations={"scheduling.koordinator.sh/usage-thresholds": "{not json"})
    env.add_node(
        "float",
        annotations={"scheduling.koordinator.sh/usage-thresholds": '{"usageThresholds": {"cpu": 50.5}}'},
    )
    for name in ("strict", "broken", "float"):
        env.report(name, cpu_milli=8800)  # (8800+250)/16000 = 56.6 % -> 57
    assert env.reason(BE, "strict") == "node(s) cpu usage exceed threshold"
    assert env.filter(BE, "broken") is None  # invalid JSON: the args (65 %) apply
    assert env.filter(BE, "float") is None  # not an integer: Go's unmarshal fails, the args apply
    # an annotation replaces the whole section: memory is no longer checked on "strict"
    env.report("strict", cpu_milli=0, memory_bytes=64 * GiB)
    assert env.filter(BE, "strict") is None


def test_prod_thresholds_apply_to_prod_pods_on_prod_usage() -> None:
    env = Env({"prodUsageThresholds": {"cpu": 30}})
    env.add_node("n")
    env.pods.put(pod("p1", node_name="n", requests={"cpu": "4"}, scheduled_at=env.now - 3600))
    env.pods.put(pod("b1", node_name="n", scheduled_at=env.now - 3600))
    # node usage 12000 (75 %: mostly batch), prod usage 4000 (25 %) reported for p1
    env.report(
        "n",
        cpu_milli=12000,
        pods=[("default", "p1", 4000, 0, "koord-prod"), ("default", "b1", 8000, 0, "koord-batch")],
    )
    # prod pod: (4000 + 1700)/16000 = 35.6 % -> 36 > 30
    assert env.reason(PROD_2CPU, "n") == "node(s) cpu usage exceed threshold"
    small_prod = pod("small", requests={"cpu": "500m"}, limits={"cpu": "500m"})  # 425m -> 27.7 % -> 28
    assert env.filter(small_prod, "n") is None
    # a batch pod is judged on the node usage against usageThresholds: 12250/16000 = 77 % > 65
    assert env.reason(BE, "n") == "node(s) cpu usage exceed threshold"


def test_prod_usage_counts_only_pods_prod_by_both_pod_and_metric() -> None:
    env = Env({"prodUsageThresholds": {"cpu": 30}})
    env.add_node("n")
    # the pod claims prod, the NodeMetric reports it as batch: its usage is replaced by its estimate (3400m)
    env.pods.put(pod("p1", node_name="n", requests={"cpu": "4"}, scheduled_at=env.now - 3600))
    env.report("n", cpu_milli=4000, pods=[("default", "p1", 4000, 0, "koord-batch")])
    small_prod = pod("small", requests={"cpu": "500m"}, limits={"cpu": "500m"})
    # prod existing = 0 + delta max(0, 3400 - 0) = 3400 (memory: the 200Mi default); + 425 = 23.9 % -> pass
    assert env.filter(small_prod, "n") is None
    assert env.plugin.cache.existing("n", prod=True) == (env.now - 10, True, (3400, 200 * 2**20))


def test_prod_usage_include_sys() -> None:
    env = Env({"prodUsageThresholds": {"cpu": 30}, "prodUsageIncludeSys": True})
    env.add_node("n")
    env.report("n", cpu_milli=6000, system=(4000, 0))
    small_prod = pod("small", requests={"cpu": "500m"}, limits={"cpu": "500m"})
    # prod existing = system 4000 + 425 = 27.7 % -> 28 pass; PROD_2CPU 5700 -> 36 fail
    assert env.filter(small_prod, "n") is None
    assert env.filter(PROD_2CPU, "n") is not None


def test_aggregated_thresholds() -> None:
    agg = {
        "aggregated": {
            "usageThresholds": {"cpu": 50},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "5m",
        }
    }
    env = Env(agg)
    env.add_node("n")
    env.report("n", cpu_milli=2000, aggregated={("p95", "5m0s"): (8000, 0)})
    # p95 over 5m: (8000 + 250)/16000 = 51.6 % -> 52 > 50, though the instant usage is low
    assert env.reason(BE, "n") == "node(s) cpu aggregated usage exceed threshold"
    # the aggregated profile replaces usageThresholds for non-prod pods
    env.report("n", cpu_milli=15000, aggregated={("p95", "5m0s"): (1000, 0)})
    assert env.filter(BE, "n") is None


def test_aggregated_longest_window_and_cold_start() -> None:
    longest = {"aggregated": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95"}}
    env = Env(longest)
    env.add_node("n")
    env.report("n", cpu_milli=0, aggregated={("p95", "5m0s"): (1000, 0), ("p95", "30m0s"): (9000, 0)})
    assert env.filter(BE, "n") is not None  # duration 0 means the longest window: 30m (57.8 %)
    env.report("n", cpu_milli=9000)  # koordlet cold: no windows yet -> falls back to nodeUsage
    assert env.reason(BE, "n") == "node(s) cpu aggregated usage exceed threshold"
    env.report("n", cpu_milli=1000)
    assert env.filter(BE, "n") is None


def test_aggregated_specific_window_missing_uses_full_estimates() -> None:
    agg = {
        "aggregated": {
            "usageThresholds": {"cpu": 50},
            "usageAggregationType": "p99",
            "usageAggregatedDuration": "10m",
        }
    }
    env = Env(agg)
    env.add_node("n")
    for i in range(5):  # 5 x 1700m of estimates, reported usage irrelevant without the window
        env.pods.put(
            pod(
                f"p{i}",
                node_name="n",
                requests={"cpu": "2"},
                limits={"cpu": "2"},
                scheduled_at=env.now - 3600,
            )
        )
    env.report("n", cpu_milli=0, pods=[("default", f"p{i}", 100, 0, "koord-prod") for i in range(5)])
    # nodeEstimated = 8500; + 250 = 54.7 % -> 55 > 50
    assert env.reason(BE, "n") == "node(s) cpu aggregated usage exceed threshold"


def test_unknown_node_passes() -> None:
    env = Env()
    from koord.scheduler.framework import CycleState, NodeInfo

    assert env.plugin.filter(CycleState(), BE, NodeInfo("ghost", None)) is None
    assert env.plugin.score(CycleState(), BE, NodeInfo("ghost", None)) == 0
