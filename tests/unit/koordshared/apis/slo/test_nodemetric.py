"""NodeMetric schema: the collect policy round-trips, the status view reads what the agent writes."""

from __future__ import annotations

from typing import Any

import pytest

from koordshared.apis.meta import quantity as timefmt
from koordshared.apis.slo.nodemetric import CollectPolicy, Usage, node_usage_problem, parse_status


def test_collect_policy_round_trips_through_the_spec() -> None:
    policy = CollectPolicy(120, 30, (60.0, 3600.0), "usageWithPageCache")
    spec = policy.to_spec()
    assert spec["metricCollectPolicy"]["nodeAggregatePolicy"]["durations"] == ["1m0s", "1h0m0s"]
    assert CollectPolicy.from_spec(spec) == policy
    assert CollectPolicy().to_spec()["metricCollectPolicy"] == {
        "aggregateDurationSeconds": 300,
        "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }


STATUS: dict[str, Any] = {
    "updateTime": "2026-01-01T00:00:10Z",
    "nodeMetric": {
        "nodeUsage": {"resources": {"cpu": "7350m", "memory": "20Gi"}},
        "systemUsage": {"resources": {"cpu": "0.5", "memory": "2Gi"}},
        "aggregatedNodeUsages": [
            {
                "duration": "5m0s",
                "usage": {"avg": {"resources": {"cpu": "7200m"}}, "p99": {"resources": {"cpu": "9"}}},
            }
        ],
    },
    "podsMetric": [
        {
            "namespace": "default",
            "name": "web-0",
            "priority": "koord-prod",
            "qos": "LS",
            "podUsage": {"resources": {"cpu": "1200m", "memory": "2Gi"}},
        },
    ],
    "hostApplicationMetric": [
        {"name": "nginx", "priority": "koord-prod", "qos": "LS", "usage": {"resources": {"cpu": "100m"}}}
    ],
    "prodReclaimableMetric": {"resource": {"resources": {"cpu": "3", "memory": "8Gi"}}},
}


def test_status_view_reads_every_field() -> None:
    s = parse_status(STATUS)
    assert s.update_time == timefmt.parse_time("2026-01-01T00:00:10Z") == 1767225610.0
    assert s.node_usage == Usage(7350, 20 * 2**30)
    assert s.system_usage == Usage(500, 2 * 2**30)
    (agg,) = s.aggregated_node_usages
    assert agg.duration_seconds == 300 and agg.usage == {"avg": Usage(7200, 0), "p99": Usage(9000, 0)}
    (pod,) = s.pods_metric
    assert (pod.namespace, pod.name, pod.priority, pod.qos, pod.usage) == (
        "default",
        "web-0",
        "koord-prod",
        "LS",
        Usage(1200, 2 * 2**30),
    )
    assert s.host_application_metric[0].usage == Usage(100, 0)
    assert s.prod_reclaimable == Usage(3000, 8 * 2**30)
    assert s.problems == ()


@pytest.mark.parametrize("status", [None, {}, "garbage", []])
def test_nothing_reported(status: Any) -> None:
    s = parse_status(status)
    assert s.update_time is None and s.node_usage is None and s.pods_metric == ()


def test_malformed_fields_are_left_out_and_named() -> None:
    bad = {
        **STATUS,
        "updateTime": "yesterday",
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "lots"}}, "systemUsage": {"resources": []}},
    }
    s = parse_status(bad)
    assert s.update_time is None and s.node_usage is None and s.system_usage is None
    assert len(s.pods_metric) == 1  # the rest is still read
    assert any("updateTime" in p for p in s.problems) and any("nodeUsage" in p for p in s.problems)


def test_time_formats() -> None:
    assert timefmt.format_time(1767225610.75) == "2026-01-01T00:00:10Z"
    assert timefmt.format_micro_time(1767225610.5) == "2026-01-01T00:00:10.500000Z"
    assert timefmt.parse_time("2026-01-01T00:00:10.500000Z") == 1767225610.5
    assert timefmt.parse_time("2026-01-01T01:00:10+01:00") == 1767225610.0
    for bad in ("2026-01-01 00:00:10", "2026-01-01T00:00:10", "", None, 5, "2026-13-01T00:00:10Z"):
        assert timefmt.parse_time(bad) is None


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        ({"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}}}, ""),
        ({"nodeMetric": {"nodeUsage": {"resources": {"cpu": "0", "memory": "0"}}}}, ""),  # idle, but said
        ({"nodeMetric": {"nodeUsage": {}}}, "node metric is incomplete"),
        ({"updateTime": "2026-01-01T00:00:00Z"}, "node metric is incomplete"),
        (None, "node metric is incomplete"),
        ({"nodeMetric": {"nodeUsage": {"resources": {"memory": "1Gi"}}}}, "cpu usage is missing"),
        ({"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}}}, "memory usage is missing"),
    ],
)
def test_node_usage_problem_as_koordinators_is_valid_node_usage(status: Any, problem: str) -> None:
    assert node_usage_problem(status) == problem
