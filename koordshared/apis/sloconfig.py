"""The NodeSLO keys of ``slo-controller-config`` and the NodeSLO spec rendered from them (schema layer).

Keys (Koordinator's names): ``resource-threshold-config``, ``resource-qos-config``, ``cpu-burst-config``,
``system-config`` — each ``{clusterStrategy, nodeStrategies: [{name, nodeSelector, ...fields inline}]}``
— and ``host-application-config`` (``{applications, nodeConfigs: [{name, nodeSelector, applications}]}``).
As in koord-manager, a cluster strategy is merged over the default and each node strategy over the
merged cluster strategy; a node gets the **first** matching node strategy, else the cluster one. A key
that is absent renders the default; one that is malformed is refused (:class:`InvalidConfig`) so the
caller keeps its last good value. Unlike Koordinator, "malformed" also covers strategies that the agent's
validation (:mod:`koordshared.apis.slovalidate`) would refuse: the manager never renders a NodeSLO every
agent would then reject.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.colocation import InvalidConfig
from koordshared.apis.nodeslo import default_spec, merge
from koordshared.apis.quantity import parse_quantity
from koordshared.apis.selector import LabelSelector, parse_selector
from koordshared.apis.slovalidate import InvalidNodeSLO, validate_spec
from koordshared.runtime.errors import InvalidValue

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
