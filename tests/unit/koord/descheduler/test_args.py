"""LowNodeLoadArgs and MigrationControllerArgs: Koordinator's defaults, conversion to pools, and
validation errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from koord.descheduler.evictor.args import IntOrPercent, max_per_workload
from koord.descheduler.evictor.args import parse_args as mc_args
from koord.descheduler.plugins.lownodeload.args import DEFAULT_POOL, AnomalyCondition, parse_args
from koordshared.runtime.errors import InvalidArgs


def test_lownodeload_defaults() -> None:
    a = parse_args(None)
    assert (a.paused, a.dry_run, a.number_of_nodes, a.node_fit) == (False, False, 0, True)
    assert a.node_metric_expiration_seconds == 180
    assert a.detector_cache_timeout == 300.0
    (pool,) = a.pools
    assert pool.name == DEFAULT_POOL and pool.node_selector is None
    assert pool.anomaly == AnomalyCondition(60.0, 5, 3)
    assert pool.resource_weights == {"cpu": 1, "memory": 1}


def test_weights_cover_threshold_resources_and_non_positive_weights_reset_to_1() -> None:
    a = parse_args(
        {
            "lowThresholds": {"pods": 50},
            "highThresholds": {"pods": 80},
            "resourceWeights": {"cpu": 0, "memory": 3},
        }
    )
    assert a.pools[0].resource_weights == {"cpu": 1, "memory": 3, "pods": 1}


def test_anomaly_fields_default_one_by_one() -> None:
    # Koordinator's else-if chain would leave consecutiveNormalities at 0 here, then refuse it
    a = parse_args({"anomalyCondition": {"timeout": "2m"}})
    assert a.pools[0].anomaly == AnomalyCondition(120.0, 5, 3)


def test_pools_come_after_the_default_pool_and_inherit_what_they_leave_out() -> None:
    a = parse_args(
        {
            "lowThresholds": {"cpu": 40},
            "highThresholds": {"cpu": 70},
            "anomalyCondition": {"consecutiveAbnormalities": 2, "timeout": "30s"},
            "nodePools": [
                {
                    "name": "gpu",
                    "nodeSelector": {"matchLabels": {"gpu": "true"}},
                    "highThresholds": {"cpu": 90},
                    "anomalyCondition": {"consecutiveNormalities": 1},
                }
            ],
        }
    )
    default, gpu = a.pools
    assert default.name == DEFAULT_POOL and gpu.name == "gpu"
    assert gpu.low == {"cpu": 40} and gpu.high == {"cpu": 90}
    assert gpu.anomaly == AnomalyCondition(30.0, 2, 1)
    assert gpu.node_selector is not None and gpu.node_selector.matches({"gpu": "true"})


def test_detector_cache_timeout_is_raised_to_the_interval() -> None:
    assert parse_args({"detectorCacheTimeout": "1m"}, interval=120.0).detector_cache_timeout == 120.0


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"numberOfNodes": -1}, "numberOfNodes"),
        ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds"),
        ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "evictableNamespaces"),
        ({"lowThresholds": {"cpu": 80}, "highThresholds": {"cpu": 70}}, "lowThresholds.cpu"),
        ({"highThresholds": {"cpu": 70}, "prodHighThresholds": {"cpu": 80}}, "prodHighThresholds.cpu"),
        ({"prodLowThresholds": {"cpu": 50}, "prodHighThresholds": {"cpu": 40}}, "prodLowThresholds.cpu"),
        ({"highThresholds": {"cpu": 101}}, "highThresholds.cpu"),
        ({"lowThresholds": {"cpu": -1}}, "lowThresholds.cpu"),
        ({"lowThresholds": {"nvidia.com/gpu": 10}}, "lowThresholds"),
        ({"lowThresholds": {"cpu": "40"}}, "lowThresholds.cpu"),
        (
            {"podSelectors": [{"selector": {"matchExpressions": [{"key": "a", "operator": "Maybe"}]}}]},
            "podSelectors[0].selector",
        ),
        (
            {"nodePools": [{"lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 10}}]},
            "nodePools[0].lowThresholds.cpu",
        ),
        ({"anomalyCondition": {"consecutiveAbnormalities": -1}}, "anomalyCondition.consecutiveAbnormalities"),
        ({"detectorCacheTimeout": 300}, "detectorCacheTimeout"),
        ({"lowThreshold": {"cpu": 10}}, "lowThreshold"),
        ({"paused": "yes"}, "paused"),
    ],
)
def test_lownodeload_errors_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs) as err:
        parse_args(raw)
    assert field in str(err.value)


def test_migration_controller_defaults() -> None:
    a = mc_args(None)
    assert a.max_migrating_per_node == 2
    assert (a.max_migrating_globally, a.max_migrating_per_namespace) == (None, None)
    assert (a.evict_qps, a.evict_burst) == (10.0, 1)
    assert a.workload_window == 300.0 and a.job_ttl == 300.0
    assert not a.evict_all_bare_pods and not a.evict_local_storage_pods


def test_migration_controller_reads_koordinators_strings_and_percentages() -> None:
    a = mc_args(
        {
            "evictQPS": "2.5",
            "maxMigratingPerWorkload": "20%",
            "maxUnavailablePerWorkload": 3,
            "objectLimiters": {"workload": {"duration": "1m", "maxMigrating": 2, "burst": 2}},
            "defaultJobMode": "ReservationFirst",
            "schedulerNames": ["koord-scheduler"],
            "skipEvictionGates": ["MaxMigratingPerNode"],
            "defaultDeleteOptions": {"gracePeriodSeconds": 5},
        }
    )
    assert a.evict_qps == 2.5
    assert a.max_migrating_per_workload == IntOrPercent(20, percent=True)
    assert a.max_unavailable_per_workload == IntOrPercent(3)
    assert (a.workload_window, a.workload_window_max, a.workload_window_burst) == (60.0, IntOrPercent(2), 2)
    assert not a.gated("MaxMigratingPerNode") and a.gated("MaxMigratingPerWorkload")
    assert a.grace_period_seconds == 5
    assert mc_args({"objectLimiters": {}}).workload_window == 0.0


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"evictionPolicy": "Delete"}, "evictionPolicy"),
        ({"evictQPS": 0}, "evictQPS"),
        ({"evictQPS": "fast"}, "evictQPS"),
        ({"evictBurst": 0}, "evictBurst"),
        ({"maxMigratingPerNode": -1}, "maxMigratingPerNode"),
        ({"maxMigratingPerWorkload": "ten"}, "maxMigratingPerWorkload"),
        ({"maxMigratingPerWorkload": "\u00b2"}, "maxMigratingPerWorkload"),  # isdigit() but not int()
        ({"namespaces": {"include": ["a"], "exclude": ["b"]}}, "namespaces"),
        ({"skipEvictionGates": ["Everything"]}, "skipEvictionGates"),
        ({"priorityThreshold": {"value": 1, "name": "x"}}, "priorityThreshold"),
        ({"nodeSelector": "a=b"}, "nodeSelector"),
        ({"defaultJobMode": "Sometimes"}, "defaultJobMode"),
        ({"evictAllBarePod": True}, "evictAllBarePod"),
    ],
)
def test_migration_controller_errors_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs) as err:
        mc_args(raw)
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("replicas", "given", "expected"),
    [
        (1, None, 1),
        (3, None, 1),
        (4, None, 2),
        (10, None, 2),
        (11, None, 1),  # 10 % of 11 rounds down to 1
        (50, None, 5),
        (10, IntOrPercent(5, True), 1),  # 5 % of 10 rounds to 0, which counts 1
        (10, IntOrPercent(30, True), 3),
        (3, IntOrPercent(5), 3),  # never more than the replicas
    ],
)
def test_max_per_workload(replicas: int, given: IntOrPercent | None, expected: int) -> None:
    assert max_per_workload(replicas, given) == expected
