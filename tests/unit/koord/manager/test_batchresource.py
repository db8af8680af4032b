"""Batch resources by Koordinator's formula, against numbers worked out by hand.

The node: 16 cores / 32Gi capacity, 15.5 cores / 30Gi allocatable (the kubelet reserves 500m / 2Gi).
Default strategy: cpu reclaim 60% -> safety margin 40% of 16000m = 6400m; memory reclaim 65% ->
margin 35% of 32Gi = int(34359738368 * 0.35) = 12025908428 bytes.
NodeMetric: system 300m / 1Gi, plus a prod host app 100m / 200Mi = 400m / 1.2Gi, below the kubelet
reservation, so the system term is max(...) = 500m / 2Gi.
High-priority load:
  web (LS, prod):   request 2000m / 2Gi, usage 1500m / 3Gi
  fresh (LS, prod): request  500m / 1Gi, not in the NodeMetric yet -> counted at its request
  db (LSE, prod):   request 2000m / 1Gi, usage 1000m / 2Gi -> CPU at its request, memory at usage
  gone (prod):      only in the NodeMetric, 200m / 512Mi (deleted since the report; still counted)
  batch (BE):       request 0, usage 2000m / 4Gi -> ignored
  usage sum: cpu 1500+500+2000+200 = 4200m; memory 3+1+2+0.5 = 6.5Gi
  request sum: cpu 4500m; memory 2+1+1 = 4Gi
  max(usage, request) per pod: cpu 2000+500+2000+200 = 4700m; memory 3+1+2+0.5 = 6.5Gi
batch-cpu (usage)   = 16000 - 6400 - 500 - 4200 = 4900
batch-cpu (maxUR)   = 16000 - 6400 - 500 - 4700 = 4400
batch-mem (usage)   = 34359738368 - 12025908428 - 2147483648 - 6979321856 = 13207024436
batch-mem (request) = 34359738368 - 12025908428 - 2147483648 - 4294967296 = 15891378996
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from koord.manager import batchresource as br
from koordshared.apis.configuration.slocontroller import DEFAULT_STRATEGY
from koordshared.apis.slo.nodemetric import parse_status

Gi, Mi = 2**30, 2**20
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def node(**annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "annotations": annotations},
        "status": {
            "capacity": {"cpu": "16", "memory": "32Gi"},
            "allocatable": {"cpu": "15500m", "memory": "30Gi"},
        },
    }


def pod(
    name: str, cpu: str, mem: str, *, qos: str = "", priority: str = "", phase: str = "Running"
) -> dict[str, Any]:
    labels = {}
    if qos:
        labels["koordinator.sh/qosClass"] = qos
    if priority:
        labels["koordinator.sh/priority-class"] = priority
    return {
        "metadata": {"namespace": "default", "name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
        "status": {"phase": phase},
    }


PODS = [
    pod("web", "2", "2Gi", qos="LS"),
    pod("fresh", "500m", "1Gi", qos="LS"),
    pod("db", "2", "1Gi", qos="LSE", priority="koord-prod"),
    pod("batch", "0", "0", qos="BE"),
    pod("done", "4", "8Gi", qos="LS", phase="Succeeded"),
]


def status(web_cpu: str = "1500m", update: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    def usage(cpu: str, mem: str) -> dict[str, Any]:
        return {"resources": {"cpu": cpu, "memory": mem}}

    return {
        "updateTime": update,
        "nodeMetric": {"nodeUsage": usage("9", "20Gi"), "systemUsage": usage("300m", "1Gi")},
        "podsMetric": [
            {
                "namespace": "default",
                "name": "web",
                "priority": "koord-prod",
                "qos": "LS",
                "podUsage": usage(web_cpu, "3Gi"),
            },
            {
                "namespace": "default",
                "name": "db",
                "priority": "koord-prod",
                "qos": "LSE",
                "podUsage": usage("1", "2Gi"),
            },
            {
                "namespace": "default",
                "name": "gone",
                "priority": "koord-prod",
                "qos": "LS",
                "podUsage": usage("200m", "512Mi"),
            },
            {
                "namespace": "default",
                "name": "batch",
                "priority": "koord-batch",
                "qos": "BE",
                "podUsage": usage("2", "4Gi"),
            },
        ],
        "hostApplicationMetric": [
            {"name": "nginx", "priority": "koord-prod", "qos": "LS", "usage": usage("100m", "200Mi")},
            {"name": "cron", "priority": "koord-batch", "qos": "BE", "usage": usage("5", "5Gi")},
        ],
    }


def calc(
    strategy: Any = DEFAULT_STRATEGY, st: dict[str, Any] | None = None, n: Any = None
) -> br.ResourceDecision:
    return br.calculate(strategy, br.node_view(n or node()), PODS, parse_status(st or status()))


def test_usage_policy_by_hand() -> None:
    got = calc()
    assert (got.cpu, got.memory) == (4900, 13207024436)
    assert "4900" in got.cpu_msg and "podHPUsed:4200" in got.cpu_msg


def test_prod_usage_up_batch_down() -> None:
    more = calc(st=status(web_cpu="2500m"))
    assert more.cpu == 4900 - 1000


def test_max_usage_request_and_request_policies() -> None:
    s = dataclasses.replace(
        DEFAULT_STRATEGY, cpu_calculate_policy="maxUsageRequest", memory_calculate_policy="request"
    )
    got = calc(s)
    assert (got.cpu, got.memory) == (4400, 15891378996)
    s = dataclasses.replace(
        DEFAULT_STRATEGY, cpu_calculate_policy="request", memory_calculate_policy="maxUsageRequest"
    )
    got = calc(s)
    assert (got.cpu, got.memory) == (4900, 13207024436)  # CPU has no request policy: usage


def test_threshold_percent_caps_and_zero_floor() -> None:
    s = dataclasses.replace(
        DEFAULT_STRATEGY, batch_cpu_threshold_percent=30, batch_memory_threshold_percent=20
    )
    got = calc(s)
    assert (got.cpu, got.memory) == (min(4900, 4800), min(13207024436, 6871947673))
    s = dataclasses.replace(DEFAULT_STRATEGY, cpu_reclaim_threshold_percent=10)  # margin 90%: nothing left
    assert calc(s).cpu == 0


def test_annotation_reservation_raises_the_system_floor() -> None:
    n = node(**{br.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs": "0-1", "resources": {"memory": "4Gi"}}'})
    got = calc(n=n)
    # system = max(kubelet 500m/2Gi, annotation 2000m/4Gi) = 2000m / 4Gi
    assert (got.cpu, got.memory) == (16000 - 6400 - 2000 - 4200, 13207024436 - 2 * Gi)
    assert br.annotation_reserved({br.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs": "x-"}'}).cpu_milli == 0


def test_degrade_when_missing_never_reported_or_stale() -> None:
    s = DEFAULT_STRATEGY  # degradeTimeMinutes 15
    fresh = parse_status(status())
    assert br.is_degraded(None, s, NOW)
    assert br.is_degraded(parse_status({}), s, NOW)
    assert not br.is_degraded(fresh, s, NOW + 15 * 60)
    assert br.is_degraded(fresh, s, NOW + 15 * 60 + 1)


@pytest.mark.parametrize(
    ("old", "new", "diff"),
    [
        (None, None, False),
        (None, 0, True),
        (1000, None, True),
        (1000, 1100, False),
        (1000, 1101, True),
        (0, 1, True),
        (0, 0, False),
    ],
)
def test_diff_threshold(old: int | None, new: int | None, diff: bool) -> None:
    assert br.is_diff(old, new, 0.1) is diff
