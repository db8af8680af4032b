"""``LoadAwareSchedulingArgs``: Koordinator's fields, defaults and validation, read strictly from the
profile's ``pluginConfig[].args``.

Defaults are Koordinator's **code defaults** (``SetDefaults_LoadAwareSchedulingArgs``), not the values
of its shipped koord-scheduler profile: a ``pluginConfig`` copied from a Koordinator install means here
exactly what it meant there, and an absent field means what Koordinator's code makes of it. So the
filter is on (cpu 65 %, memory 95 %) and a NodeMetric older than 180 s makes its node unschedulable
(DaemonSet pods, including the agent, still pass). Koordinator's shipped profile turns the filter off
(``usageThresholds: {cpu: 0, memory: 0}``) and keeps stale metrics usable
(``filterExpiredNodeMetrics: false``, ``nodeMetricExpirationSeconds: 300``); set those to get it.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.framework import InvalidArgs
from koordshared.apis.meta.strictargs import decode
from koordshared.apis.slo.nodemetric import AGGREGATIONS

RESOURCES = ("cpu", "memory")
"""The vectorizer: Koordinator sorts resource names, so cpu comes before memory in every vector."""
DEFAULT_ESTIMATOR = "defaultEstimator"

DEFAULT_EXPIRATION_SECONDS = 180
DEFAULT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS = {"cpu": 65, "memory": 95}
DEFAULT_SCALING_FACTORS = {"cpu": 85, "memory": 70}

Vec = tuple[int, int]


def to_vec(values: Mapping[str, int]) -> Vec:
    """Koordinator's ``ToFactorVec``: the value per vectorizer resource, 0 when absent."""
    return (int(values.get("cpu", 0)), int(values.get("memory", 0)))


@dataclass(frozen=True, slots=True)
class AggregatedArgs:
    usage_thresholds: Mapping[str, int] = field(default_factory=dict)
    usage_aggregation_type: str = ""
    usage_aggregated_duration: float = 0.0
    """Seconds; 0 means the longest window the NodeMetric reports."""
    score_aggregation_type: str = ""
    score_aggregated_duration: float = 0.0


@dataclass(frozen=True, slots=True)
class LoadAwareSchedulingArgs:
    """The defaulted, validated args (see the module docstring for the defaults chosen)."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS
    enable_schedule_when_node_metrics_expired: bool = False
    resource_weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    dominant_resource_weight: int = 0
    usage_thresholds: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE_THRESHOLDS))
    prod_usage_thresholds: Mapping[str, int] = field(default_factory=dict)
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    estimator: str = DEFAULT_ESTIMATOR
    estimated_scaling_factors: Mapping[str, int] = field(
        default_factory=lambda: dict(DEFAULT_SCALING_FACTORS)
    )
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    aggregated: AggregatedArgs | None = None
    supported_resources: tuple[str, ...] = ()


_FIELDS = {
    "filterExpiredNodeMetrics": "bool",
    "nodeMetricExpirationSeconds": "int",
    "enableScheduleWhenNodeMetricsExpired": "bool",
    "resourceWeights": "int_map",
    "dominantResourceWeight": "int",
    "usageThresholds": "int_map",
    "prodUsageThresholds": "int_map",
    "prodUsageIncludeSys": "bool",
    "scoreAccordingProdUsage": "bool",
    "estimator": "str",
    "estimatedScalingFactors": "int_map",
    "estimatedSecondsAfterPodScheduled": "int",
    "estimatedSecondsAfterInitialized": "int",
    "allowCustomizeEstimation": "bool",
    "aggregated": "object",
    "supportedResources": "str_list",
}
_AGG_FIELDS = {
    "usageThresholds": "int_map",
    "usageAggregationType": "str",
    "usageAggregatedDuration": "duration",
    "scoreAggregationType": "str",
    "scoreAggregatedDuration": "duration",
}


def _check_names(values: Mapping[str, int] | tuple[str, ...], at: str) -> None:
    bad = sorted(n for n in values if n not in RESOURCES)
    if bad:
        raise InvalidArgs(
            f"{at}: resource(s) {', '.join(bad)} not supported: a NodeMetric reports cpu and memory only"
        )


def _check_range(values: Mapping[str, int], at: str, low: int, what: str) -> None:
    for name, v in sorted(values.items()):
        if v < low or v > 100:
            raise InvalidArgs(f"{at}.{name}: {what} must be in {low}..100, got {v}")


def _check_type(value: str, at: str) -> None:
    if value and value not in AGGREGATIONS:
        raise InvalidArgs(f"{at}: {value!r} not supported; want one of {', '.join(AGGREGATIONS)}")


def parse_args(raw: Mapping[str, Any] | None) -> LoadAwareSchedulingArgs:
    """Decode, default and validate (``ValidateLoadAwareSchedulingArgs``); :class:`InvalidArgs` names
    the first field in error."""
    v = decode(raw, _FIELDS)
    agg: AggregatedArgs | None = None
    if "aggregated" in v:
        a = decode(v["aggregated"], _AGG_FIELDS, "aggregated.")
        agg = AggregatedArgs(
            usage_thresholds=a.get("usageThresholds", {}),
            usage_aggregation_type=a.get("usageAggregationType", ""),
            usage_aggregated_duration=a.get("usageAggregatedDuration", 0.0),
            score_aggregation_type=a.get("scoreAggregationType", ""),
            score_aggregated_duration=a.get("scoreAggregatedDuration", 0.0),
        )
    dominant = v.get("dominantResourceWeight", 0)
    weights = v.get("resourceWeights") or {}
    if not weights and dominant == 0:
        weights = dict(DEFAULT_RESOURCE_WEIGHTS)
    factors = {**DEFAULT_SCALING_FACTORS, **v.get("estimatedScalingFactors", {})}
    args = LoadAwareSchedulingArgs(
        filter_expired_node_metrics=v.get("filterExpiredNodeMetrics", True),
        node_metric_expiration_seconds=v.get("nodeMetricExpirationSeconds", DEFAULT_EXPIRATION_SECONDS),
        enable_schedule_when_node_metrics_expired=v.get("enableScheduleWhenNodeMetricsExpired", False),
        resource_weights=weights,
        dominant_resource_weight=dominant,
        usage_thresholds=v.get("usageThresholds") or dict(DEFAULT_USAGE_THRESHOLDS),
        prod_usage_thresholds=v.get("prodUsageThresholds", {}),
        prod_usage_include_sys=v.get("prodUsageIncludeSys", False),
        score_according_prod_usage=v.get("scoreAccordingProdUsage", False),
        estimator=v.get("estimator") or DEFAULT_ESTIMATOR,
        estimated_scaling_factors=factors,
        estimated_seconds_after_pod_scheduled=v.get("estimatedSecondsAfterPodScheduled"),
        estimated_seconds_after_initialized=v.get("estimatedSecondsAfterInitialized"),
        allow_customize_estimation=v.get("allowCustomizeEstimation", False),
        aggregated=agg,
        supported_resources=v.get("supportedResources", ()),
    )
    validate(args)
    return args


def validate(args: LoadAwareSchedulingArgs) -> None:
    if args.node_metric_expiration_seconds <= 0:
        raise InvalidArgs(
            f"nodeMetricExpirationSeconds: must be positive, got {args.node_metric_expiration_seconds}"
        )
    for at, values in (
        ("resourceWeights", args.resource_weights),
        ("usageThresholds", args.usage_thresholds),
        ("prodUsageThresholds", args.prod_usage_thresholds),
        ("estimatedScalingFactors", args.estimated_scaling_factors),
        ("aggregated.usageThresholds", args.aggregated.usage_thresholds if args.aggregated else {}),
    ):
        _check_names(values, at)
    _check_names(args.supported_resources, "supportedResources")
    _check_range(args.resource_weights, "resourceWeights", 1, "a weight")
    if not 0 <= args.dominant_resource_weight <= 100:
        raise InvalidArgs(f"dominantResourceWeight: must be in 0..100, got {args.dominant_resource_weight}")
    _check_range(args.usage_thresholds, "usageThresholds", 0, "a threshold")
    # Koordinator validates neither prodUsageThresholds nor the node annotation; a percentage outside
    # 0..100 can only be a mistake, so it is refused here.
    _check_range(args.prod_usage_thresholds, "prodUsageThresholds", 0, "a threshold")
    _check_range(args.estimated_scaling_factors, "estimatedScalingFactors", 1, "a scaling factor")
    missing = sorted(set(args.resource_weights) - set(args.estimated_scaling_factors))
    if missing:
        raise InvalidArgs(
            f"estimatedScalingFactors: missing {', '.join(missing)} (weighted in resourceWeights)"
        )
    if args.estimator != DEFAULT_ESTIMATOR:
        raise InvalidArgs(f"estimator: {args.estimator!r} unknown; the only estimator is {DEFAULT_ESTIMATOR}")
    agg = args.aggregated
    if agg is not None:
        _check_range(agg.usage_thresholds, "aggregated.usageThresholds", 0, "a threshold")
        _check_type(agg.usage_aggregation_type, "aggregated.usageAggregationType")
        _check_type(agg.score_aggregation_type, "aggregated.scoreAggregationType")
        for name, d in (
            ("usageAggregatedDuration", agg.usage_aggregated_duration),
            ("scoreAggregatedDuration", agg.score_aggregated_duration),
        ):
            if d < 0:
                raise InvalidArgs(f"aggregated.{name}: must be >= 0")
