"""The assign cache (Koordinator's ``pkg/scheduler/plugins/loadaware/pod_assign_cache.go``): pods placed after
the NodeMetric snapshot count with ``max(0, estimate - reported)``, older reported pods do not;
reserve/unreserve; pod updates (condition changes, a changed nodeName, termination); forced-estimation
windows; NodeMetric deletion."""

from __future__ import annotations

from typing import Any

from koord.scheduler.framework import CycleState
from koordshared.testing.objects import pod
from tests.support.scheduler.env import Env

MiB200 = 200 * 2**20


def two_cpu(name: str, node: str = "n", **kw: Any) -> dict[str, Any]:
    return pod(
        name,
        node_name=node,
        requests={"cpu": "2", "memory": "1Gi"},
        limits={"cpu": "2", "memory": "1Gi"},
        **kw,
    )


def existing(env: Env, node: str = "n") -> tuple[int, int]:
    got = env.plugin.cache.existing(node, prod=False)
    assert got is not None
    return got.usage


def test_recent_unreported_and_old_pods() -> None:
    env = Env()
    env.add_node("n")
    now = env.now
    # updateTime = now - 10, report interval 60: pods scheduled after now - 70 are "recent"
    env.pods.put(two_cpu("old", scheduled_at=now - 3600))  # reported: no delta
    env.pods.put(two_cpu("recent", scheduled_at=now - 30))  # reported 500m: delta 1700 - 500 = 1200
    env.pods.put(two_cpu("unreported", scheduled_at=now - 3600))  # not in the report: full estimate
    env.report(
        "n",
        cpu_milli=5000,
        memory_bytes=0,
        pods=[("default", "old", 1000, 0, "koord-prod"), ("default", "recent", 500, 0, "koord-prod")],
    )
    mem_est = round(2**30 * 0.7)
    assert existing(env) == (5000 + 1200 + 1700, mem_est * 2)
    dbg = env.plugin.cache.debug("n")
    assert dbg["nodeDeltaPods"] == ["default/recent", "default/unreported"]
    assert dbg["nodeEstimated"] == [3 * 1700, 3 * mem_est]


def test_report_interval_from_the_spec() -> None:
    env = Env()
    env.add_node("n")
    env.pods.put(two_cpu("p", scheduled_at=env.now - 100))
    env.report("n", cpu_milli=0, pods=[("default", "p", 1700, 0, "koord-prod")])
    assert existing(env)[0] == 0  # scheduled 100 s ago < updateTime(-10) - 60: its usage is in the report
    env.report("n", cpu_milli=0, pods=[("default", "p", 1000, 0, "koord-prod")], report_interval=120)
    assert existing(env)[0] == 700  # within 120 s of the report: still estimated


def test_reserve_before_binding_and_unreserve_on_failure() -> None:
    env = Env()
    env.add_node("n")
    env.report("n", cpu_milli=1000)
    incoming = two_cpu("new", node="")
    state = CycleState()
    env.plugin.reserve(state, incoming, "n")
    assert existing(env)[0] == 1000 + 1700  # no PodScheduled yet: assigned "now", after the report
    env.plugin.unreserve(state, incoming, "n")
    assert existing(env)[0] == 1000
    # reserved, then the pod cache sees it bound: the entry is replaced, not doubled
    env.plugin.reserve(state, incoming, "n")
    bound = {**incoming, "spec": {**incoming["spec"], "nodeName": "n"}}
    env.pods.put(incoming)  # seen pending first (no node: not assigned)
    env.pods.put(bound)
    assert existing(env)[0] == 1000 + 1700
    assert len(env.plugin.cache.debug("n")["pods"]) == 1


def test_changed_node_name_leaves_no_ghost_load() -> None:
    env = Env()
    for n in ("a", "b"):
        env.add_node(n)
        env.report(n, cpu_milli=0)
    p = two_cpu("p", node="a", scheduled_at=env.now - 5)
    env.pods.put(p)
    assert existing(env, "a")[0] == 1700
    env.pods.put({**p, "spec": {**p["spec"], "nodeName": "b"}})
    assert existing(env, "a")[0] == 0
    assert existing(env, "b")[0] == 1700


def test_terminated_and_deleted_pods_leave() -> None:
    env = Env()
    env.add_node("n")
    env.report("n", cpu_milli=0)
    p = two_cpu("p", scheduled_at=env.now - 5)
    env.pods.put(p)
    env.pods.put({**p, "status": {**p["status"], "phase": "Succeeded"}})
    assert existing(env)[0] == 0
    q = two_cpu("q", scheduled_at=env.now - 5)
    env.pods.put(q)
    env.pods.remove("default/q")
    assert existing(env)[0] == 0


def test_timestamp_from_pod_scheduled_not_renewed_by_updates() -> None:
    env = Env()
    env.add_node("n")
    p = two_cpu("p", scheduled_at=env.now - 3600)
    env.pods.put(p)
    env.report("n", cpu_milli=1700, pods=[("default", "p", 1700, 0, "koord-prod")])
    env.clock.advance(30)
    env.pods.put({**p, "metadata": {**p["metadata"], "labels": {"touched": "yes"}}})
    assert existing(env)[0] == 1700  # still judged from its PodScheduled time, not the update's


def test_forced_estimation_after_scheduled_and_after_initialized() -> None:
    env = Env({"estimatedSecondsAfterPodScheduled": 600})
    env.add_node("n")
    p = two_cpu("p", scheduled_at=env.now - 300)  # older than the report interval, younger than 600 s
    env.pods.put(p)
    env.report("n", cpu_milli=500, pods=[("default", "p", 500, 0, "koord-prod")])
    assert existing(env)[0] == 500 + 1200
    env.clock.advance(400)  # deadline now - 300 + 600 passes before this report's updateTime
    env.report("n", cpu_milli=500, pods=[("default", "p", 500, 0, "koord-prod")])
    assert existing(env)[0] == 500

    env2 = Env({"estimatedSecondsAfterInitialized": 120, "estimatedSecondsAfterPodScheduled": 10000})
    env2.add_node("n")
    q = two_cpu("q", scheduled_at=env2.now - 5000, initialized_at=env2.now - 100)
    env2.pods.put(q)
    env2.report("n", cpu_milli=500, pods=[("default", "q", 500, 0, "koord-prod")])
    # initialized 100 s ago, window 120 s: estimated (the longer after-scheduled window is ignored)
    assert existing(env2)[0] == 1700
    env2.clock.advance(60)
    env2.report("n", cpu_milli=500, pods=[("default", "q", 500, 0, "koord-prod")])
    assert existing(env2)[0] == 500


def test_pod_annotations_when_customization_allowed() -> None:
    ann = {
        "scheduling.koordinator.sh/load-estimated-scaling-factors": '{"cpu": 50}',
        "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled": "900",
    }
    for allowed, want in ((True, 500 + (1000 - 500)), (False, 500)):
        env = Env({"allowCustomizeEstimation": allowed})
        env.add_node("n")
        env.pods.put(two_cpu("p", scheduled_at=env.now - 300, annotations=ann))
        env.report("n", cpu_milli=500, pods=[("default", "p", 500, 0, "koord-prod")])
        # allowed: factor 50 % of 2 cpu = 1000m, forced for 900 s -> delta 500
        assert existing(env)[0] == want


def test_node_metric_deleted_then_node_has_no_metric() -> None:
    env = Env()
    env.add_node("n")
    env.report("n", cpu_milli=16000)
    assert env.plugin.cache.existing("n", prod=False) is not None
    env.metrics.remove("n")
    assert env.plugin.cache.existing("n", prod=False) is None
    assert env.filter(pod("be"), "n") is None
    assert len(env.plugin.cache) == 0
