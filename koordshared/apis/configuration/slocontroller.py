"""The keys of ``koordinator-system/slo-controller-config``: ``colocation-config`` (Koordinator's
``ColocationCfg``, the strategy for one node: :func:`node_strategy`) and the NodeSLO keys
(``resource-threshold-config``, ``resource-qos-config``, ``cpu-burst-config``, ``system-config``,
``host-application-config``), with the NodeSLO spec rendered from them (:func:`render_spec`).

As in koord-manager, a cluster strategy is merged over the default and each node strategy over the merged
cluster strategy; a node gets the **first** matching node strategy, else the cluster one. A malformed key is
refused (:class:`InvalidConfig`) so the caller keeps its last good value; for the NodeSLO keys "malformed"
also covers what the agent's validation (:mod:`koordshared.apis.slo.nodeslo.validate`) would refuse.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.quantity import parse_duration, parse_quantity
from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.apis.slo.nodemetric import MEMORY_COLLECT_POLICIES, CollectPolicy
from koordshared.apis.slo.nodeslo import default_spec, merge
from koordshared.apis.slo.validate import InvalidNodeSLO, validate_spec
from koordshared.runtime.errors import InvalidValue

COLOCATION_CONFIG_KEY = "colocation-config"
ANNOTATION_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_CPU_RESERVED_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_MEMORY_RESERVED_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"

CALCULATE_BY_USAGE = "usage"
CALCULATE_BY_REQUEST = "request"
CALCULATE_BY_MAX_USAGE_REQUEST = "maxUsageRequest"


class InvalidConfig(ValueError):
    """A config key Koordinator would refuse (bad JSON, wrong types, an invalid cluster strategy)."""


# JSON name -> (attribute, JSON type). Every field is optional; None means "not set".
_FIELDS: dict[str, tuple[str, type]] = {
    "enable": ("enable", bool),
    "metricAggregateDurationSeconds": ("metric_aggregate_duration_seconds", int),
    "metricReportIntervalSeconds": ("metric_report_interval_seconds", int),
    "metricAggregatePolicy": ("metric_aggregate_durations", dict),
    "metricMemoryCollectPolicy": ("metric_memory_collect_policy", str),
    "cpuReclaimThresholdPercent": ("cpu_reclaim_threshold_percent", int),
    "cpuCalculatePolicy": ("cpu_calculate_policy", str),
    "memoryReclaimThresholdPercent": ("memory_reclaim_threshold_percent", int),
    "memoryCalculatePolicy": ("memory_calculate_policy", str),
    "degradeTimeMinutes": ("degrade_time_minutes", int),
    "updateTimeThresholdSeconds": ("update_time_threshold_seconds", int),
    "resourceDiffThreshold": ("resource_diff_threshold", float),
    "midReclaimMode": ("mid_reclaim_mode", str),
    "midCPUThresholdPercent": ("mid_cpu_threshold_percent", int),
    "midMemoryThresholdPercent": ("mid_memory_threshold_percent", int),
    "midUnallocatedPercent": ("mid_unallocated_percent", int),
    "midStaticCPUReservedPercent": ("mid_static_cpu_reserved_percent", int),
    "midStaticMemoryReservedPercent": ("mid_static_memory_reserved_percent", int),
    "batchCPUThresholdPercent": ("batch_cpu_threshold_percent", int),
    "batchMemoryThresholdPercent": ("batch_memory_threshold_percent", int),
    "extensions": ("extensions", dict),
}


@dataclass(frozen=True, slots=True)
class ColocationStrategy:
    """``configuration.ColocationStrategy``; ``None`` = not set (merging keeps the base's value)."""

    enable: bool | None = None
    metric_aggregate_duration_seconds: int | None = None
    metric_report_interval_seconds: int | None = None
    metric_aggregate_durations: tuple[float, ...] | None = None
    metric_memory_collect_policy: str | None = None
    cpu_reclaim_threshold_percent: int | None = None
    cpu_calculate_policy: str | None = None
    memory_reclaim_threshold_percent: int | None = None
    memory_calculate_policy: str | None = None
    degrade_time_minutes: int | None = None
    update_time_threshold_seconds: int | None = None
    resource_diff_threshold: float | None = None
    mid_reclaim_mode: str | None = None
    mid_cpu_threshold_percent: int | None = None
    mid_memory_threshold_percent: int | None = None
    mid_unallocated_percent: int | None = None
    mid_static_cpu_reserved_percent: int | None = None
    mid_static_memory_reserved_percent: int | None = None
    batch_cpu_threshold_percent: int | None = None
    batch_memory_threshold_percent: int | None = None
    extensions: Mapping[str, Any] | None = None

    def merged(self, over: ColocationStrategy) -> ColocationStrategy:
        """``over`` laid onto ``self`` (``util.MergeCfg``): set fields win; ``extensions`` merge by key."""
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(over, f.name)
            if value is None:
                continue
            if f.name == "extensions" and self.extensions is not None:
                value = {**self.extensions, **value}
            changes[f.name] = value
        return dataclasses.replace(self, **changes) if changes else self

    def problems(self) -> list[str]:
        """Why Koordinator's ``IsColocationStrategyValid`` refuses it (empty: valid)."""
        out: list[str] = []

        def check(name: str, value: float | None, ok: bool) -> None:
            if value is not None and not ok:
                out.append(f"{name}: {value} out of range")

        v = self
        check(
            "metricAggregateDurationSeconds",
            v.metric_aggregate_duration_seconds,
            (v.metric_aggregate_duration_seconds or 0) > 0,
        )
        check(
            "metricReportIntervalSeconds",
            v.metric_report_interval_seconds,
            (v.metric_report_interval_seconds or 0) > 0,
        )
        for name, value in (
            ("cpuReclaimThresholdPercent", v.cpu_reclaim_threshold_percent),
            ("memoryReclaimThresholdPercent", v.memory_reclaim_threshold_percent),
            ("midStaticCPUReservedPercent", v.mid_static_cpu_reserved_percent),
            ("midStaticMemoryReservedPercent", v.mid_static_memory_reserved_percent),
            ("batchCPUThresholdPercent", v.batch_cpu_threshold_percent),
            ("batchMemoryThresholdPercent", v.batch_memory_threshold_percent),
        ):
            check(name, value, (value or 0) >= 0)
        check("degradeTimeMinutes", v.degrade_time_minutes, (v.degrade_time_minutes or 0) > 0)
        check(
            "updateTimeThresholdSeconds",
            v.update_time_threshold_seconds,
            (v.update_time_threshold_seconds or 0) > 0,
        )
        check("resourceDiffThreshold", v.resource_diff_threshold, (v.resource_diff_threshold or 0) > 0)
        for name, value in (
            ("midCPUThresholdPercent", v.mid_cpu_threshold_percent),
            ("midMemoryThresholdPercent", v.mid_memory_threshold_percent),
            ("midUnallocatedPercent", v.mid_unallocated_percent),
        ):
            check(name, value, 0 <= (value or 0) <= 100)
        if v.metric_memory_collect_policy is not None and not v.metric_memory_collect_policy:
            out.append("metricMemoryCollectPolicy: empty")
        return out


DEFAULT_STRATEGY = ColocationStrategy(
    enable=False,
    metric_aggregate_duration_seconds=300,
    metric_report_interval_seconds=60,
    metric_aggregate_durations=(300.0, 600.0, 1800.0),
    metric_memory_collect_policy=MEMORY_COLLECT_POLICIES[0],
    cpu_reclaim_threshold_percent=60,
    cpu_calculate_policy=CALCULATE_BY_USAGE,
    memory_reclaim_threshold_percent=65,
    memory_calculate_policy=CALCULATE_BY_USAGE,
    degrade_time_minutes=15,
    update_time_threshold_seconds=300,
    resource_diff_threshold=0.1,
    mid_cpu_threshold_percent=100,
    mid_memory_threshold_percent=100,
    mid_unallocated_percent=0,
    mid_static_cpu_reserved_percent=0,
    mid_static_memory_reserved_percent=0,
)
"""``sloconfig.DefaultColocationStrategy()``."""


@dataclass(frozen=True, slots=True)
class NodeColocationConfig:
    name: str
    selector: LabelSelector
    strategy: ColocationStrategy


@dataclass(frozen=True, slots=True)
class ColocationConfig:
    """The parsed key: the cluster strategy (merged over the defaults) and the node configs (each merged
    over the cluster strategy)."""

    cluster: ColocationStrategy = DEFAULT_STRATEGY
    node_configs: tuple[NodeColocationConfig, ...] = ()
    warnings: tuple[str, ...] = dataclasses.field(default=(), compare=False)


def _value(json_name: str, kind: type, raw: Any) -> Any:
    if raw is None:
        return None
    if kind is float:
        ok = isinstance(raw, (int, float)) and not isinstance(raw, bool)
    elif kind is int:
        ok = isinstance(raw, int) and not isinstance(raw, bool)
    else:
        ok = isinstance(raw, kind)
    if not ok:
        raise InvalidConfig(f"{json_name}: expected a {kind.__name__} (JSON), got {raw!r}")
    if json_name == "metricAggregatePolicy":
        durations = raw.get("durations")
        if durations is None:
            return None
        if not isinstance(durations, list):
            raise InvalidConfig("metricAggregatePolicy.durations: must be a list")
        try:
            return tuple(parse_duration(str(d)) for d in durations)
        except InvalidValue as err:
            raise InvalidConfig(f"metricAggregatePolicy.durations: {err}") from err
    return float(raw) if kind is float else raw


def strategy_from_json(obj: Mapping[str, Any]) -> ColocationStrategy:
    """The strategy fields of ``obj`` (others ignored, as Go's unmarshal does); :class:`InvalidConfig`
    for a field of the wrong type."""
    values = {attr: _value(name, kind, obj.get(name)) for name, (attr, kind) in _FIELDS.items()}
    return ColocationStrategy(**values)


def parse_colocation_config(text: str) -> ColocationConfig:
    """Koordinator's ``syncConfig`` for a non-empty key; :class:`InvalidConfig` when it would refuse it."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise InvalidConfig(f"{COLOCATION_CONFIG_KEY}: not JSON: {err}") from err
    if not isinstance(doc, Mapping):
        raise InvalidConfig(f"{COLOCATION_CONFIG_KEY}: must be a JSON object")
    cluster = DEFAULT_STRATEGY.merged(strategy_from_json(doc))
    problems = cluster.problems()
    if problems:
        raise InvalidConfig(f"{COLOCATION_CONFIG_KEY}: invalid cluster strategy: {'; '.join(problems)}")
    raw_nodes = doc.get("nodeConfigs") or []
    if not isinstance(raw_nodes, list):
        raise InvalidConfig(f"{COLOCATION_CONFIG_KEY}: nodeConfigs must be a list")
    nodes: list[NodeColocationConfig] = []
    warnings: list[str] = []
    for i, raw in enumerate(raw_nodes):
        if not isinstance(raw, Mapping):
            raise InvalidConfig(f"{COLOCATION_CONFIG_KEY}: nodeConfigs[{i}] must be an object")
        name = str(raw.get("name") or f"#{i}")
        merged = cluster.merged(strategy_from_json(raw))
        selector = parse_selector(raw.get("nodeSelector"))
        if selector.error:
            warnings.append(f"nodeConfigs[{name}]: {selector.error}; it matches no node")
        if merged.problems():
            # Koordinator replaces an invalid node config by the cluster strategy (its selector still counts).
            warnings.append(
                f"nodeConfigs[{name}]: invalid ({'; '.join(merged.problems())}); using the cluster strategy"
            )
            merged = cluster
        nodes.append(NodeColocationConfig(name, selector, merged))
    return ColocationConfig(cluster, tuple(nodes), tuple(warnings))


def _reclaim_percent(labels: Mapping[str, str], key: str) -> int | None:
    raw = labels.get(key)
    if raw is None:
        return None
    try:
        ratio = float(raw)
    except ValueError:
        return None
    return int(ratio * 100) if ratio >= 0 else None


def node_strategy(
    cfg: ColocationConfig, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ColocationStrategy:
    """``GetNodeColocationStrategy``: cluster, first matching node config, annotation, ratio labels."""
    strategy = cfg.cluster
    for node_cfg in cfg.node_configs:
        if node_cfg.selector.matches(labels):
            strategy = strategy.merged(node_cfg.strategy)
            break
    raw = annotations.get(ANNOTATION_COLOCATION_STRATEGY)
    if raw is not None:
        try:
            doc = json.loads(raw)
            if isinstance(doc, Mapping):
                strategy = strategy.merged(strategy_from_json(doc))
        except (ValueError, InvalidConfig):
            pass  # Koordinator ignores an unparsable annotation (logged at V(5))
    overrides: dict[str, Any] = {
        attr: percent
        for attr, key in (
            ("cpu_reclaim_threshold_percent", LABEL_CPU_RECLAIM_RATIO),
            ("memory_reclaim_threshold_percent", LABEL_MEMORY_RECLAIM_RATIO),
            ("mid_static_cpu_reserved_percent", LABEL_MID_CPU_RESERVED_RATIO),
            ("mid_static_memory_reserved_percent", LABEL_MID_MEMORY_RESERVED_RATIO),
        )
        if (percent := _reclaim_percent(labels, key)) is not None
    }
    return dataclasses.replace(strategy, **overrides) if overrides else strategy


def collect_policy(strategy: ColocationStrategy) -> CollectPolicy | None:
    """``getNodeMetricCollectPolicy``: the policy of an enabled, valid strategy; ``None`` otherwise (the
    NodeMetric then keeps the default spec)."""
    if strategy.problems() or not strategy.enable:
        return None
    d = CollectPolicy()
    return CollectPolicy(
        aggregate_duration_seconds=strategy.metric_aggregate_duration_seconds or d.aggregate_duration_seconds,
        report_interval_seconds=strategy.metric_report_interval_seconds or d.report_interval_seconds,
        durations=strategy.metric_aggregate_durations or d.durations,
        memory_policy=strategy.metric_memory_collect_policy or d.memory_policy,
    )


ANNOTATION_NODE_BANDWIDTH = "node.koordinator.sh/network-bandwidth"
HOST_APPLICATION_CONFIG_KEY = "host-application-config"

# ConfigMap key -> the NodeSLO spec section it configures.
STRATEGY_KEYS: dict[str, str] = {
    "resource-threshold-config": "resourceUsedThresholdWithBE",
    "resource-qos-config": "resourceQOSStrategy",
    "cpu-burst-config": "cpuBurstStrategy",
    "system-config": "systemStrategy",
}
NODESLO_CONFIG_KEYS = (*STRATEGY_KEYS, HOST_APPLICATION_CONFIG_KEY)
_PROFILE_FIELDS = ("name", "nodeSelector")


def default_section(section: str) -> dict[str, Any]:
    """The cluster default of a section, as koord-manager's ``DefaultSLOCfg`` (resource QoS: empty; the
    agent lays it over its class defaults)."""
    if section == "resourceQOSStrategy":
        return {}
    out: dict[str, Any] = default_spec()[section]
    return out


@dataclass(frozen=True, slots=True)
class NodeStrategy:
    name: str
    selector: LabelSelector
    value: Any
    """A strategy section (dict) or, for host applications, the list of applications."""


@dataclass(frozen=True, slots=True)
class KeyConfig:
    """One key, merged: the cluster value and the node strategies in order."""

    cluster: Any
    nodes: tuple[NodeStrategy, ...] = ()

    def for_node(self, labels: Mapping[str, str]) -> Any:
        for node in self.nodes:
            if node.selector.matches(labels):
                return copy.deepcopy(node.value)
        return copy.deepcopy(self.cluster)


def default_key_config(key: str) -> KeyConfig:
    if key == HOST_APPLICATION_CONFIG_KEY:
        return KeyConfig([])
    return KeyConfig(default_section(STRATEGY_KEYS[key]))


def _load(key: str, text: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise InvalidConfig(f"{key}: not JSON: {err}") from err
    if not isinstance(doc, Mapping):
        raise InvalidConfig(f"{key}: must be a JSON object")
    return doc


def _check(key: str, section: str, value: Any, where: str) -> None:
    try:
        validate_spec({section: value})
    except InvalidNodeSLO as err:
        raise InvalidConfig(f"{key}: {where}: {err}") from err


def _entries(key: str, doc: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    raw = doc.get(field) or []
    if not isinstance(raw, list) or not all(isinstance(x, Mapping) for x in raw):
        raise InvalidConfig(f"{key}: {field} must be a list of objects")
    return raw


def parse_key(key: str, text: str) -> KeyConfig:
    """Parse and merge one key's JSON; :class:`InvalidConfig` when Koordinator's unmarshal or the agent's
    validation would refuse it."""
    doc = _load(key, text)
    if key == HOST_APPLICATION_CONFIG_KEY:
        return _parse_host_apps(key, doc)
    section = STRATEGY_KEYS[key]
    raw_cluster = doc.get("clusterStrategy")
    if raw_cluster is not None and not isinstance(raw_cluster, Mapping):
        raise InvalidConfig(f"{key}: clusterStrategy must be an object")
    cluster = merge(default_section(section), raw_cluster or {})
    _check(key, section, cluster, "clusterStrategy")
    nodes = []
    for i, entry in enumerate(_entries(key, doc, "nodeStrategies")):
        name = str(entry.get("name") or f"#{i}")
        own = {k: v for k, v in entry.items() if k not in _PROFILE_FIELDS}
        value = merge(cluster, own)
        _check(key, section, value, f"nodeStrategies[{name}]")
        nodes.append(NodeStrategy(name, parse_selector(entry.get("nodeSelector")), value))
    return KeyConfig(cluster, tuple(nodes))


def _parse_host_apps(key: str, doc: Mapping[str, Any]) -> KeyConfig:
    def apps(raw: Any, where: str) -> list[Any]:
        value = raw if raw is not None else []
        try:
            validate_spec({"hostApplications": value})
        except InvalidNodeSLO as err:
            raise InvalidConfig(f"{key}: {where}: {err}") from err
        return list(value)

    nodes = [
        NodeStrategy(
            str(e.get("name") or f"#{i}"),
            parse_selector(e.get("nodeSelector")),
            apps(e.get("applications"), f"nodeConfigs[{i}]"),
        )
        for i, e in enumerate(_entries(key, doc, "nodeConfigs"))
    ]
    return KeyConfig(apps(doc.get("applications"), "applications"), tuple(nodes))


def render_spec(
    configs: Mapping[str, KeyConfig],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    old_spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The NodeSLO ``spec`` for a node (``getNodeSLOSpec``); keys missing from ``configs`` render their
    defaults. ``extensions`` of the old spec are kept (no extension plugins are registered here)."""

    def key_config(key: str) -> KeyConfig:
        return configs.get(key) or default_key_config(key)

    spec: dict[str, Any] = {}
    for key, section in STRATEGY_KEYS.items():
        spec[section] = key_config(key).for_node(labels)
    bandwidth = annotations.get(ANNOTATION_NODE_BANDWIDTH)
    if bandwidth is not None:
        try:
            parse_quantity(bandwidth)
        except InvalidValue:
            pass  # Koordinator logs the bad annotation and keeps the configured value
        else:
            spec["systemStrategy"]["totalNetworkBandwidth"] = bandwidth
    host_apps = key_config(HOST_APPLICATION_CONFIG_KEY).for_node(labels)
    if host_apps:
        spec["hostApplications"] = host_apps
    old_ext = (old_spec or {}).get("extensions")
    spec["extensions"] = copy.deepcopy(old_ext) if isinstance(old_ext, Mapping) else {}
    return spec
