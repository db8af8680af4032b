"""LoadAwareSchedulingArgs: Koordinator's code defaults, strict decoding, validation naming the field;
the default estimator (priority-class resources, defaults for empty pods, limit caps)."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework import InvalidArgs
from koord.scheduler.plugins.loadaware.args import parse_args
from koord.scheduler.plugins.loadaware.estimator import estimate_pod, node_capacity, priority_class
from koordshared.testing.objects import GiB, node, pod

FACTORS = {"cpu": 85, "memory": 70}


def test_code_defaults() -> None:
    a = parse_args(None)
    assert a.filter_expired_node_metrics is True
    assert a.node_metric_expiration_seconds == 180
    assert a.enable_schedule_when_node_metrics_expired is False
    assert dict(a.resource_weights) == {"cpu": 1, "memory": 1}
    assert dict(a.usage_thresholds) == {"cpu": 65, "memory": 95}
    assert dict(a.estimated_scaling_factors) == {"cpu": 85, "memory": 70}
    assert a.aggregated is None and not a.score_according_prod_usage


def test_defaulting_rules() -> None:
    assert dict(parse_args({"usageThresholds": {}}).usage_thresholds) == {"cpu": 65, "memory": 95}
    assert dict(parse_args({"usageThresholds": {"cpu": 0, "memory": 0}}).usage_thresholds) == {
        "cpu": 0,
        "memory": 0,
    }
    assert dict(parse_args({"estimatedScalingFactors": {"cpu": 100}}).estimated_scaling_factors) == {
        "cpu": 100,
        "memory": 70,
    }
    assert dict(parse_args({"dominantResourceWeight": 1}).resource_weights) == {}
    # apiVersion/kind inside args are stripped by the profile, nulls mean absent
    assert parse_args({"filterExpiredNodeMetrics": None}).filter_expired_node_metrics is True


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds"),
        ({"resourceWeights": {"cpu": 0}}, "resourceWeights.cpu"),
        ({"resourceWeights": {"cpu": 101}}, "resourceWeights.cpu"),
        ({"dominantResourceWeight": -1}, "dominantResourceWeight"),
        ({"usageThresholds": {"cpu": 101}}, "usageThresholds.cpu"),
        ({"usageThresholds": {"cpu": -1}}, "usageThresholds.cpu"),
        ({"estimatedScalingFactors": {"memory": 0}}, "estimatedScalingFactors.memory"),
        ({"usageThresholds": {"nvidia.com/gpu": 50}}, "usageThresholds"),
        ({"supportedResources": ["ephemeral-storage"]}, "supportedResources"),
        ({"aggregated": {"usageAggregationType": "p42"}}, "aggregated.usageAggregationType"),
        ({"aggregated": {"usageAggregatedDuration": "five minutes"}}, "aggregated.usageAggregatedDuration"),
        ({"aggregated": {"scoreAggregatedDuration": 300}}, "aggregated.scoreAggregatedDuration"),
        ({"estimator": "magic"}, "estimator"),
        ({"filterExpiredNodeMetrics": "yes"}, "filterExpiredNodeMetrics"),
        ({"nodeMetricExpirationSeconds": 1.5}, "nodeMetricExpirationSeconds"),
        ({"usageTresholds": {"cpu": 50}}, "usageTresholds"),
        ({"aggregated": {"usageThreshold": {}}}, "usageThreshold"),
    ],
)
def test_invalid_args_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs, match=field.replace(".", r"\.")):
        parse_args(raw)


def test_aggregated_durations_are_go_durations() -> None:
    agg = parse_args(
        {
            "aggregated": {
                "usageThresholds": {"cpu": 60},
                "usageAggregationType": "p95",
                "usageAggregatedDuration": "5m",
            }
        }
    ).aggregated
    assert agg is not None and agg.usage_aggregated_duration == 300.0


def test_estimates() -> None:
    burstable = pod("b", requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "2", "memory": "2Gi"})
    assert estimate_pod(burstable, FACTORS) == (1700, 1503238554)  # max(limit, request) x factor
    assert estimate_pod(pod("be"), FACTORS) == (250, 200 * 2**20)  # batch, no batch-* requests: defaults
    batch = pod("bt", requests={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"})
    assert priority_class(batch).value == "koord-batch"
    assert estimate_pod(batch, FACTORS) == (1700, round(4 * GiB * 0.7))
    mid = pod("m", labels={"koordinator.sh/priority-class": "koord-mid"}, requests={"cpu": "1"})
    assert estimate_pod(mid, FACTORS) == (0, 0)  # mid-cpu/mid-memory empty: no default for mid resources
    mid2 = pod("m2", priority=7500, requests={"kubernetes.io/mid-cpu": "1000"})
    assert estimate_pod(mid2, FACTORS) == (850, 0)
    odd = pod("odd", requests={"cpu": "2"}, limits={"cpu": "1"})  # request above limit: capped at the limit
    assert estimate_pod(odd, FACTORS)[0] == 1000
    assert estimate_pod(burstable, {"cpu": 85}) == (1700, 0)  # no factor, no estimate
    half = pod("h", requests={"cpu": "1m"})  # 1 x 85 / 100 = 0.85 -> 1 (half away from zero)
    assert estimate_pod(half, FACTORS)[0] == 1


def test_node_capacity_prefers_raw_allocatable() -> None:
    assert node_capacity(node("n", "16", "64Gi")) == (16000, 64 * GiB)
    amplified = node("n", "32", "64Gi", annotations={"node.koordinator.sh/raw-allocatable": '{"cpu": "16"}'})
    assert node_capacity(amplified) == (16000, 64 * GiB)
