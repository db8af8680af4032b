"""NodeMetric status from a MetricCache with known samples on a fake clock (values computed by hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordlet import api
from koordlet.api.metrics import (
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE,
    NODE_NUMA_CPU_USAGE,
    NODE_NUMA_MEMORY_USAGE,
    SYS_NUMA_CPU_USAGE,
)
from koordlet.metriccache import MetricCache
from koordlet.statesinformer.nodemetric import StatusBuilder, write_atomic
from koordlet.testing import FakeClock
from koordshared.apis.slo.nodemetric import CollectPolicy
from tests import crdschema
from tests.apiserver.fixtures import NODEMETRIC_CRD

GI = 2**30
UID_A = "0f5e6a2c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"
UID_B = "1f5e6a2c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"


def pod(uid: str, name: str, qos: api.QOSClass, prio: api.PriorityClass) -> api.PodInfo:
    return api.PodInfo(
        uid=uid,
        namespace="default",
        name=name,
        qos=qos,
        kube_qos=api.KubeQOSClass.BURSTABLE,
        priority_class=prio,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=10_000.0, wall_start=1_767_225_600.0)  # 2026-01-01T00:00:00Z


@pytest.fixture
def cache(clock: FakeClock) -> MetricCache:
    return MetricCache(clock=clock, wall_clock=clock.wall)


def fill(cache: MetricCache, clock: FakeClock, seconds: int, cpu: float, mem: float) -> None:
    for _ in range(seconds):
        cache.append(api.NODE_CPU_USAGE, None, cpu)
        cache.append(api.NODE_MEMORY_USAGE, None, mem)
        clock.advance(1)


def test_usage_average_and_cold_start_omission(cache: MetricCache, clock: FakeClock) -> None:
    # 400 s of samples: 1.0 core/4 GiB for the first 200 s, then 3.0 cores/6 GiB (one per second).
    fill(cache, clock, 200, 1.0, 4 * GI)
    fill(cache, clock, 200, 3.0, 6 * GI)
    clock.advance(0.5)
    status = StatusBuilder(cache, clock.wall).build(CollectPolicy(), [])
    nm = status["nodeMetric"]
    # Samples sit at t0..t0+399 and now is t0+400.5, so the 300 s window holds t0+101..t0+399: 99 samples
    # of the first phase and 200 of the second. cpu avg = (99*1 + 200*3)/299 = 2.3377 cores -> "2337m";
    # memory = (99*4 + 200*6)/299 GiB, truncated to bytes and printed plain (not a whole binary unit).
    assert nm["nodeUsage"]["resources"]["cpu"] == "2337m"
    assert nm["nodeUsage"]["resources"]["memory"] == str(int(1596 * GI / 299))
    by_dur = {a["duration"]: a["usage"] for a in nm["aggregatedNodeUsages"]}
    assert list(by_dur) == ["5m0s", "10m0s", "30m0s"]
    five = by_dur["5m0s"]
    assert five["avg"]["resources"]["cpu"] == "2337m"
    # p50 of 299 sorted values = index int(299*0.5)-1 = 148 -> 3.0 (only 99 ones); p99 = 3.0
    assert five["p50"]["resources"] == {"cpu": "3", "memory": "6Gi"}
    assert five["p99"]["resources"]["cpu"] == "3"
    # 10 min window: 400 s of data >= half of 600 s -> present; avg = (200*1+200*3)/400 = 2
    assert by_dur["10m0s"]["avg"]["resources"] == {"cpu": "2", "memory": "5Gi"}
    # p50 over 400 values: index 199 -> 1.0 (first 200 are ones)
    assert by_dur["10m0s"]["p50"]["resources"]["cpu"] == "1"
    # 30 min window: 400 s < 900 s -> cold start: every aggregation there, empty (koordlet's shape)
    assert by_dur["30m0s"] == {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}}
    assert status["updateTime"] == "2026-01-01T00:06:40Z"
    # Go's omitempty: no pods and no host applications -> the lists are left out, not printed empty;
    # no prediction -> prodReclaimableMetric {resource: {}} (koordlet always sets it), no prodPeakMetric
    assert "podsMetric" not in status and "hostApplicationMetric" not in status
    assert status["prodReclaimableMetric"] == {"resource": {}} and "prodPeakMetric" not in status
    crdschema.validate(status, NODEMETRIC_CRD, "status")


def test_aggregate_duration_min_60_and_policy(cache: MetricCache, clock: FakeClock) -> None:
    fill(cache, clock, 30, 2.0, GI)  # old: outside a 60 s window
    fill(cache, clock, 60, 4.0, 2 * GI)
    policy = CollectPolicy.from_spec(
        {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": 10,
                "nodeAggregatePolicy": {"durations": ["1m"]},
            }
        }
    )
    assert policy.durations == (60.0,) and policy.aggregate_duration_seconds == 10
    nm = StatusBuilder(cache, clock.wall).build(policy, [])["nodeMetric"]
    # window clamped to 60 s: only the 4-core samples (a 10 s window would also give 4, so check memory
    # against the 30 s of 1 GiB that a wider window would mix in)
    assert nm["nodeUsage"]["resources"] == {"cpu": "4", "memory": "2Gi"}
    assert [a["duration"] for a in nm["aggregatedNodeUsages"]] == ["1m0s"]


def test_memory_collect_policy_with_page_cache(cache: MetricCache, clock: FakeClock) -> None:
    for _ in range(10):
        cache.append(api.NODE_CPU_USAGE, None, 1.0)
        cache.append(api.NODE_MEMORY_USAGE, None, GI)
        cache.append(NODE_MEMORY_USAGE_WITH_PAGE_CACHE, None, 3 * GI)
        clock.advance(1)
    b = StatusBuilder(cache, clock.wall)
    plain = b.build(CollectPolicy(), [])["nodeMetric"]["nodeUsage"]["resources"]["memory"]
    cached = b.build(CollectPolicy(memory_policy="usageWithPageCache"), [])["nodeMetric"]["nodeUsage"]
    hot = b.build(CollectPolicy(memory_policy="usageWithHotPageCache"), [])["nodeMetric"]["nodeUsage"]
    assert (plain, cached["resources"]["memory"], hot["resources"]["memory"]) == ("1Gi", "3Gi", "1Gi")


def test_pods_and_host_apps(cache: MetricCache, clock: FakeClock) -> None:
    for i in range(4):
        cache.append(api.POD_CPU_USAGE, {"pod_uid": UID_A}, 0.5 + i)  # 0.5 1.5 2.5 3.5 -> avg 2.0
        cache.append(api.POD_MEMORY_USAGE, {"pod_uid": UID_A}, 100 * 2**20)
        cache.append(api.HOST_APP_CPU_USAGE, {"host_app_name": "nginx"}, 0.1)
        cache.append(api.HOST_APP_MEMORY_USAGE, {"host_app_name": "nginx"}, 200 * 2**20)
        clock.advance(1)
    pods = [
        pod(UID_B, "zz-no-samples", api.QOSClass.BE, api.PriorityClass.BATCH),
        pod(UID_A, "web-0", api.QOSClass.LS, api.PriorityClass.PROD),
    ]
    apps = [
        api.HostApplication(name="nginx", priority=api.PriorityClass.PROD, qos=api.QOSClass.LS),
        api.HostApplication(name="idle", qos=api.QOSClass.BE),
    ]
    status = StatusBuilder(cache, clock.wall).build(CollectPolicy(), pods, apps)
    assert status["podsMetric"] == [
        {
            "namespace": "default",
            "name": "web-0",
            "priority": "koord-prod",
            "qos": "LS",
            "podUsage": {"resources": {"cpu": "2", "memory": "100Mi"}},
        }
    ]
    assert status["hostApplicationMetric"] == [
        {
            "name": "nginx",
            "priority": "koord-prod",
            "qos": "LS",
            "usage": {"resources": {"cpu": "100m", "memory": "200Mi"}},
        }
    ]
    crdschema.validate(status, NODEMETRIC_CRD, "status")


def test_empty_cache_is_valid_and_empty(cache: MetricCache, clock: FakeClock) -> None:
    status = StatusBuilder(cache, clock.wall).build(CollectPolicy(), [])
    assert status["nodeMetric"]["nodeUsage"] == {} and status["nodeMetric"]["systemUsage"] == {}
    cold: dict[str, dict[str, Any]] = {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}}
    assert all(a["usage"] == cold for a in status["nodeMetric"]["aggregatedSystemUsages"])
    assert "numaUsages" not in status["nodeMetric"]
    crdschema.validate(status, NODEMETRIC_CRD, "status")


def test_policy_defaults_on_garbage() -> None:
    p = CollectPolicy.from_spec(
        {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": "x",
                "nodeAggregatePolicy": {"durations": ["5 min"]},
            }
        }
    )
    assert p == CollectPolicy()


def test_write_atomic_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "koordlet" / "nodemetric.json"
    write_atomic(target, {"a": 1})
    write_atomic(target, {"b": [1, 2]})
    assert target.read_text().replace(" ", "").replace("\n", "") == '{"b":[1,2]}'
    assert [p.name for p in target.parent.iterdir()] == ["nodemetric.json"]  # no temp left behind


def test_numa_usages_sorted_and_skipped_without_samples(cache: MetricCache, clock: FakeClock) -> None:
    for _ in range(3):
        for numa, cpu in (("1", 0.5), ("0", 1.25)):
            cache.append(NODE_NUMA_CPU_USAGE, {"numa_node_id": numa}, cpu)
            cache.append(NODE_NUMA_MEMORY_USAGE, {"numa_node_id": numa}, GI)
        cache.append(SYS_NUMA_CPU_USAGE, {"numa_node_id": "0"}, 0.1)
        clock.advance(1)
    cache.append(NODE_NUMA_CPU_USAGE, {"numa_node_id": "2"}, 9.0)
    clock.advance(400)  # numa 2's only sample, and everything else, is now outside a 300 s window...
    for numa in ("0", "1"):
        cache.append(NODE_NUMA_CPU_USAGE, {"numa_node_id": numa}, 1.0)  # ...but 0 and 1 have fresh ones
    cache.append(NODE_NUMA_MEMORY_USAGE, {"numa_node_id": "0"}, 2 * GI)  # (1 has no memory: skipped too)
    status = StatusBuilder(cache, clock.wall).build(CollectPolicy(), [])
    assert status["nodeMetric"]["numaUsages"] == [
        {"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "1", "memory": "2Gi"}}},
    ]
    clock.advance(-400)  # fake clocks may go back: see the first samples again
    numa = StatusBuilder(cache, clock.wall).build(CollectPolicy(), [])["nodeMetric"]["numaUsages"]
    assert numa[0] == {
        "numaNodeID": 0,
        "nodeUsage": {"resources": {"cpu": "1250m", "memory": "1Gi"}},
    }  # system CPU without system memory: no systemUsage (koordlet needs both)
    crdschema.validate(status, NODEMETRIC_CRD, "status")
