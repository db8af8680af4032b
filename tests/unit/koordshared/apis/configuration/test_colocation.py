"""colocation-config: Koordinator's syncConfig (defaults, validation, node configs), per-node strategy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordshared.apis.configuration import slocontroller as co
from koordshared.apis.meta.selector import parse_selector
from koordshared.apis.slo.nodemetric import CollectPolicy


def parse(doc: Any) -> co.ColocationConfig:
    return co.parse_colocation_config(json.dumps(doc))


def test_cluster_strategy_merged_over_defaults() -> None:
    cfg = parse(
        {"enable": True, "cpuReclaimThresholdPercent": 70, "metricAggregatePolicy": {"durations": ["1m"]}}
    )
    c = cfg.cluster
    assert c.enable is True and c.cpu_reclaim_threshold_percent == 70
    assert c.memory_reclaim_threshold_percent == 65 and c.degrade_time_minutes == 15  # defaults kept
    assert c.metric_aggregate_durations == (60.0,)
    assert c.resource_diff_threshold == 0.1


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '["a list"]',
        json.dumps({"enable": "yes"}),  # Go's unmarshal refuses a string for a bool
        json.dumps({"cpuReclaimThresholdPercent": 1.5}),
        json.dumps({"metricAggregateDurationSeconds": 0}),  # invalid cluster strategy
        json.dumps({"resourceDiffThreshold": 0}),
        json.dumps({"metricAggregatePolicy": {"durations": ["soon"]}}),
        json.dumps({"nodeConfigs": {"name": "x"}}),
    ],
)
def test_refused_configs(text: str) -> None:
    with pytest.raises(co.InvalidConfig):
        co.parse_colocation_config(text)


def test_invalid_node_config_falls_back_to_the_cluster_strategy() -> None:
    cfg = parse(
        {
            "enable": True,
            "cpuReclaimThresholdPercent": 70,
            "nodeConfigs": [
                {"name": "bad", "nodeSelector": {"matchLabels": {"pool": "a"}}, "degradeTimeMinutes": -1},
                {
                    "name": "good",
                    "nodeSelector": {"matchLabels": {"pool": "b"}},
                    "cpuReclaimThresholdPercent": 50,
                },
            ],
        }
    )
    bad, good = cfg.node_configs
    assert bad.strategy == cfg.cluster and any("bad" in w for w in cfg.warnings)
    assert good.strategy.cpu_reclaim_threshold_percent == 50 and good.strategy.enable is True


def test_node_strategy_first_match_then_annotation_then_ratio_labels() -> None:
    cfg = parse(
        {
            "enable": True,
            "nodeConfigs": [
                {
                    "name": "a",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "memoryReclaimThresholdPercent": 50,
                },
                {
                    "name": "a2",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "memoryReclaimThresholdPercent": 10,
                },
            ],
        }
    )
    assert co.node_strategy(cfg, {"pool": "a"}, {}).memory_reclaim_threshold_percent == 50  # first match only
    assert co.node_strategy(cfg, {"pool": "z"}, {}).memory_reclaim_threshold_percent == 65
    ann = {
        co.ANNOTATION_COLOCATION_STRATEGY: json.dumps({"memoryReclaimThresholdPercent": 40, "enable": False})
    }
    s = co.node_strategy(cfg, {"pool": "a"}, ann)
    assert s.memory_reclaim_threshold_percent == 40 and s.enable is False
    labels = {"pool": "a", co.LABEL_CPU_RECLAIM_RATIO: "0.45", co.LABEL_MEMORY_RECLAIM_RATIO: "-1"}
    s = co.node_strategy(cfg, labels, {co.ANNOTATION_COLOCATION_STRATEGY: "{broken"})
    assert s.cpu_reclaim_threshold_percent == 45  # label wins; a negative ratio is ignored
    assert s.memory_reclaim_threshold_percent == 50  # a broken annotation is ignored


def test_collect_policy_only_when_enabled_and_valid() -> None:
    cfg = parse({"metricReportIntervalSeconds": 20})
    assert co.collect_policy(cfg.cluster) is None  # colocation disabled: the default spec stays
    cfg = parse(
        {"enable": True, "metricReportIntervalSeconds": 20, "metricMemoryCollectPolicy": "usageWithPageCache"}
    )
    assert co.collect_policy(cfg.cluster) == CollectPolicy(
        300, 20, (300.0, 600.0, 1800.0), "usageWithPageCache"
    )
    bad = co.node_strategy(
        cfg, {}, {co.ANNOTATION_COLOCATION_STRATEGY: json.dumps({"metricReportIntervalSeconds": -5})}
    )
    assert co.collect_policy(bad) is None


def test_extensions_merge_by_key() -> None:
    base = co.ColocationStrategy(extensions={"a": 1, "b": 2})
    assert base.merged(co.ColocationStrategy(extensions={"b": 3})).extensions == {"a": 1, "b": 3}


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        (None, {"a": "1"}, False),
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, {"a": ""}, False),
        ({"matchLabels": {"a": 1}}, {"a": "1"}, False),
    ],
)
def test_label_selector(selector: Any, labels: dict[str, str], want: bool) -> None:
    assert parse_selector(selector).matches(labels) is want
