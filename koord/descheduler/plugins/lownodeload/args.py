"""``LowNodeLoadArgs`` (``descheduler/v1alpha2``): Koordinator's fields, defaults, conversion to node pools
and validation, read strictly from the profile's ``pluginConfig[].args``.

Conversion: the top-level ``nodeSelector``, ``useDeviationThresholds``, thresholds, weights and
``anomalyCondition`` become a pool named ``__default_node_pool__``, put before ``nodePools``; a pool
inherits the thresholds, weights and anomaly condition it leaves out (not ``useDeviationThresholds``,
a plain bool in Koordinator). Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs

RESOURCES = ("cpu", "memory", "pods")
DEFAULT_POOL = "__default_node_pool__"
DEFAULT_EXPIRATION_SECONDS = 180
DEFAULT_DETECTOR_CACHE_TIMEOUT = 300.0
DEFAULT_TIMEOUT = 60.0
DEFAULT_ABNORMALITIES = 5
DEFAULT_NORMALITIES = 3

Thresholds = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class AnomalyCondition:
    timeout: float = DEFAULT_TIMEOUT
    consecutive_abnormalities: int = DEFAULT_ABNORMALITIES
    consecutive_normalities: int = DEFAULT_NORMALITIES


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool = False
    high: Thresholds = field(default_factory=dict)
    low: Thresholds = field(default_factory=dict)
    prod_high: Thresholds = field(default_factory=dict)
    prod_low: Thresholds = field(default_factory=dict)
    resource_weights: Mapping[str, int] = field(default_factory=dict)
    anomaly: AnomalyCondition = field(default_factory=AnomalyCondition)


@dataclass(frozen=True, slots=True)
class PodSelector:
    name: str
    selector: LabelSelector


@dataclass(frozen=True, slots=True)
class LowNodeLoadArgs:
    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS
    include_namespaces: frozenset[str] = frozenset()
    exclude_namespaces: frozenset[str] = frozenset()
    pod_selectors: tuple[PodSelector, ...] = ()
    node_fit: bool = True
    detector_cache_timeout: float = DEFAULT_DETECTOR_CACHE_TIMEOUT
    pools: tuple[NodePool, ...] = ()


_THRESHOLD_FIELDS = {
    "useDeviationThresholds": "bool",
    "highThresholds": "number_map",
    "lowThresholds": "number_map",
    "prodHighThresholds": "number_map",
    "prodLowThresholds": "number_map",
    "resourceWeights": "int_map",
    "anomalyCondition": "object",
    "nodeSelector": "object",
}
_FIELDS = {
    **_THRESHOLD_FIELDS,
    "paused": "bool",
    "dryRun": "bool",
    "numberOfNodes": "int",
    "nodeMetricExpirationSeconds": "int",
    "evictableNamespaces": "object",
    "podSelectors": "object_list",
    "nodeFit": "bool",
    "detectorCacheTimeout": "duration",
    "nodePools": "object_list",
}
_POOL_FIELDS = {**_THRESHOLD_FIELDS, "name": "str"}
_ANOMALY_FIELDS = {"timeout": "duration", "consecutiveAbnormalities": "int", "consecutiveNormalities": "int"}


def _selector(raw: Any, at: str) -> LabelSelector | None:
    if raw is None:
        return None
    selector = parse_selector(raw)
    if selector.error:
        raise InvalidArgs(f"{at}: {selector.error}")
    return selector


def _namespaces(raw: Mapping[str, Any] | None) -> tuple[frozenset[str], frozenset[str]]:
    v = decode(raw, {"include": "str_list", "exclude": "str_list"}, "evictableNamespaces.")
    include, exclude = frozenset(v.get("include", ())), frozenset(v.get("exclude", ()))
    if include and exclude:
        raise InvalidArgs("evictableNamespaces: only one of include and exclude may be set")
    return include, exclude


def _anomaly(raw: Mapping[str, Any] | None, inherit: AnomalyCondition, at: str) -> AnomalyCondition:
    v = decode(raw, _ANOMALY_FIELDS, f"{at}.")
    for key in ("consecutiveAbnormalities", "consecutiveNormalities"):
        if v.get(key, 0) < 0:
            raise InvalidArgs(f"{at}.{key}: must be greater than 0, got {v[key]}")
    timeout = v.get("timeout", 0.0)
    if timeout < 0:
        raise InvalidArgs(f"{at}.timeout: must not be negative")
    return AnomalyCondition(
        timeout=timeout or inherit.timeout,
        consecutive_abnormalities=v.get("consecutiveAbnormalities") or inherit.consecutive_abnormalities,
        consecutive_normalities=v.get("consecutiveNormalities") or inherit.consecutive_normalities,
    )


def _weights(given: Mapping[str, int] | None, low: Thresholds, high: Thresholds) -> dict[str, int]:
    """``SetDefaults``: cpu, memory and every threshold resource weigh 1 unless given a positive weight."""
    defaults = dict.fromkeys(("cpu", "memory", *low, *high), 1)
    out = dict(given or {})
    for name, weight in defaults.items():
        if out.get(name, 0) <= 0:
            out[name] = weight
    return out


def _validate_pool(pool: NodePool, at: str) -> None:
    for what, values in (
        ("highThresholds", pool.high),
        ("lowThresholds", pool.low),
        ("prodHighThresholds", pool.prod_high),
        ("prodLowThresholds", pool.prod_low),
        ("resourceWeights", pool.resource_weights),
    ):
        bad = sorted(n for n in values if n not in RESOURCES)
        if bad:
            raise InvalidArgs(
                f"{at}{what}: resource(s) {', '.join(bad)} not supported: usage is known for "
                f"{', '.join(RESOURCES)} only"
            )
        if what != "resourceWeights":
            for name, pct in sorted(values.items()):
                if not 0 <= pct <= 100:
                    raise InvalidArgs(f"{at}{what}.{name}: a percentage must be in 0..100, got {pct}")
    for lower, lows, upper, highs in (
        ("lowThresholds", pool.low, "highThresholds", pool.high),
        ("prodHighThresholds", pool.prod_high, "highThresholds", pool.high),
        ("prodLowThresholds", pool.prod_low, "prodHighThresholds", pool.prod_high),
    ):
        for name, pct in sorted(lows.items()):
            if name in highs and pct > highs[name]:
                raise InvalidArgs(f"{at}{lower}.{name}: {pct} is above {upper}.{name} ({highs[name]})")


def parse_args(raw: Mapping[str, Any] | None, interval: float = 0.0) -> LowNodeLoadArgs:
    """Decode, default, convert and validate; :class:`InvalidArgs` names the first field in error.
    ``interval`` is the descheduling interval (seconds), the floor of ``detectorCacheTimeout``."""
    v = decode(raw, _FIELDS)
    include, exclude = _namespaces(v.get("evictableNamespaces"))
    selectors = []
    for i, item in enumerate(v.get("podSelectors", [])):
        s = decode(item, {"name": "str", "selector": "object"}, f"podSelectors[{i}].")
        sel = _selector(s.get("selector"), f"podSelectors[{i}].selector")
        if sel is not None:  # a selector-less entry selects nothing more than no entry (Koordinator)
            selectors.append(PodSelector(s.get("name", ""), sel))
    if v.get("numberOfNodes", 0) < 0:
        raise InvalidArgs(f"numberOfNodes: must be 0 or more, got {v['numberOfNodes']}")
    expiration = v.get("nodeMetricExpirationSeconds", DEFAULT_EXPIRATION_SECONDS)
    if expiration <= 0:
        raise InvalidArgs(f"nodeMetricExpirationSeconds: must be positive, got {expiration}")
    top_anomaly = _anomaly(v.get("anomalyCondition"), AnomalyCondition(), "anomalyCondition")
    high, low = v.get("highThresholds", {}), v.get("lowThresholds", {})
    default_pool = NodePool(
        name=DEFAULT_POOL,
        node_selector=_selector(v.get("nodeSelector"), "nodeSelector"),
        use_deviation_thresholds=v.get("useDeviationThresholds", False),
        high=high,
        low=low,
        prod_high=v.get("prodHighThresholds", {}),
        prod_low=v.get("prodLowThresholds", {}),
        resource_weights=_weights(v.get("resourceWeights"), low, high),
        anomaly=top_anomaly,
    )
    pools = [default_pool]
    for i, item in enumerate(v.get("nodePools", [])):
        at = f"nodePools[{i}]"
        p = decode(item, _POOL_FIELDS, f"{at}.")
        pools.append(
            NodePool(
                name=p.get("name", ""),
                node_selector=_selector(p.get("nodeSelector"), f"{at}.nodeSelector"),
                use_deviation_thresholds=p.get("useDeviationThresholds", False),
                high=p.get("highThresholds", default_pool.high),
                low=p.get("lowThresholds", default_pool.low),
                prod_high=p.get("prodHighThresholds", default_pool.prod_high),
                prod_low=p.get("prodLowThresholds", default_pool.prod_low),
                resource_weights=p.get("resourceWeights", default_pool.resource_weights),
                anomaly=_anomaly(p.get("anomalyCondition"), top_anomaly, f"{at}.anomalyCondition"),
            )
        )
    for i, pool in enumerate(pools):
        _validate_pool(pool, "" if i == 0 else f"nodePools[{i - 1}].")
    return LowNodeLoadArgs(
        paused=v.get("paused", False),
        dry_run=v.get("dryRun", False),
        number_of_nodes=v.get("numberOfNodes", 0),
        node_metric_expiration_seconds=expiration,
        include_namespaces=include,
        exclude_namespaces=exclude,
        pod_selectors=tuple(selectors),
        node_fit=v.get("nodeFit", True),
        detector_cache_timeout=max(v.get("detectorCacheTimeout", DEFAULT_DETECTOR_CACHE_TIMEOUT), interval),
        pools=tuple(pools),
    )
