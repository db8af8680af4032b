"""Which usage thresholds apply on a node: the args, overridden section by section by the node's
``scheduling.koordinator.sh/usage-thresholds`` annotation (Koordinator's ``usageThresholdsFilterProfile``).

The annotation is JSON ``{"usageThresholds": {..}, "prodUsageThresholds": {..}, "aggregatedUsage":
{"usageThresholds": {..}, "usageAggregationType": "p95", "usageAggregatedDuration": "5m"}}``. Each
non-empty section replaces the args' one; an aggregated section without thresholds or a type is
ignored; an annotation that does not decode leaves the args in force. Resources other than cpu and
memory are ignored, as Koordinator's vectorizer ignores names it does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs, Vec, to_vec
from koordshared.apis.core.pod import as_map
from koordshared.apis.meta.quantity import parse_duration
from koordshared.runtime.errors import InvalidValue

ANNOTATION_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"


@dataclass(frozen=True, slots=True)
class AggregatedProfile:
    thresholds: Vec
    aggregation_type: str
    duration: float
    """Seconds; 0 means the longest window reported."""


@dataclass(frozen=True, slots=True)
class FilterProfile:
    usage: Vec = (0, 0)
    prod: Vec = (0, 0)
    """All zero: no prod thresholds (prod pods use the usage thresholds like everyone else)."""
    aggregated: AggregatedProfile | None = None


def args_profile(args: LoadAwareSchedulingArgs) -> FilterProfile:
    agg = args.aggregated
    return FilterProfile(
        usage=to_vec(args.usage_thresholds),
        prod=to_vec(args.prod_usage_thresholds),
        aggregated=AggregatedProfile(
            to_vec(agg.usage_thresholds), agg.usage_aggregation_type, agg.usage_aggregated_duration
        )
        if agg is not None and agg.usage_thresholds and agg.usage_aggregation_type
        else None,
    )


class _Invalid(ValueError):
    pass


def _thresholds(raw: Any) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in raw.values()
    ):
        raise _Invalid()
    return {str(k): int(v) for k, v in raw.items()}


def node_profile(base: FilterProfile, node: Any) -> FilterProfile:
    """``base`` with the node's annotation laid over it (``base`` itself when there is nothing valid)."""
    text = as_map(as_map(node, "metadata"), "annotations").get(ANNOTATION_USAGE_THRESHOLDS)
    if not isinstance(text, str) or not text:
        return base
    try:
        doc = json.loads(text)
        if not isinstance(doc, Mapping):
            raise _Invalid()
        usage = _thresholds(doc.get("usageThresholds"))
        prod = _thresholds(doc.get("prodUsageThresholds"))
        raw_agg = doc.get("aggregatedUsage")
        agg: AggregatedProfile | None = None
        if raw_agg is not None:
            if not isinstance(raw_agg, Mapping):
                raise _Invalid()
            agg_thr = _thresholds(raw_agg.get("usageThresholds"))
            agg_type = raw_agg.get("usageAggregationType") or ""
            raw_duration = raw_agg.get("usageAggregatedDuration")
            if not isinstance(agg_type, str) or not (raw_duration is None or isinstance(raw_duration, str)):
                raise _Invalid()
            duration = parse_duration(raw_duration) if raw_duration else 0.0
            if agg_thr and agg_type:
                agg = AggregatedProfile(to_vec(agg_thr), agg_type, duration)
    except (ValueError, InvalidValue):
        return base
    if not usage and not prod and agg is None:
        return base
    return FilterProfile(
        usage=to_vec(usage) if usage else base.usage,
        prod=to_vec(prod) if prod else base.prod,
        aggregated=agg if agg is not None else base.aggregated,
    )
