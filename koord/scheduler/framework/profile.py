"""The extender's profile, read from ``--config`` in the shape of KubeSchedulerConfiguration
(``kubescheduler.config.k8s.io/v1``): ``profiles[0].plugins.<point>.enabled/disabled[{name, weight}]`` and
``profiles[0].pluginConfig[{name, args}]``.

Merging follows kube-scheduler: the default plugins (LoadAwareScheduling at ``multiPoint``, weight 1)
minus ``disabled`` (a name, or ``"*"`` for all defaults), with ``enabled`` entries replacing a default
of the same name in place and the rest appended. Anything malformed is a :class:`ConfigError` that
names the field; nothing is silently ignored except keys that belong to kube-scheduler itself
(``extenders``, ``leaderElection``, ``clientConnection``...), so one file can describe both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koord.runtime.configfile import read_config_file
from koord.runtime.errors import ConfigError
from koord.runtime.pluginregistry import plugin_config
from koord.scheduler.framework.interface import EXTENSION_POINTS

API_GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
MULTI_POINT = "multiPoint"
POINTS = (MULTI_POINT, *EXTENSION_POINTS)
UNSUPPORTED_POINTS = ("preEnqueue", "queueSort", "postFilter", "permit", "preBind", "bind", "postBind")
"""kube-scheduler's points an extender cannot take part in; enabling a plugin there is an error."""


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    weight: int = 0
    """Score weight; 0 means "not set" (then the multiPoint weight, else 1)."""


@dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()

    def disables(self, name: str) -> bool:
        return "*" in self.disabled or name in self.disabled


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str = "default-scheduler"
    plugins: Mapping[str, PluginSet] = field(default_factory=dict)
    """Extension point (``multiPoint``, ``filter``, ...) -> the merged set."""
    plugin_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Plugin name -> its ``args`` (``apiVersion``/``kind`` removed)."""

    def point(self, name: str) -> PluginSet:
        return self.plugins.get(name, PluginSet())

    def names(self) -> list[str]:
        """Every plugin enabled anywhere, in first-seen order."""
        seen: dict[str, None] = {}
        for point in POINTS:
            for ref in self.point(point).enabled:
                seen.setdefault(ref.name, None)
        return list(seen)


DEFAULT_PLUGINS: Mapping[str, PluginSet] = {
    MULTI_POINT: PluginSet(enabled=(PluginRef("LoadAwareScheduling", 1),)),
}


def _plugin_set(raw: Any, where: str) -> PluginSet:
    if raw is None:
        return PluginSet()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object with enabled/disabled, got {raw!r}")
    unknown = sorted(set(raw) - {"enabled", "disabled"})
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    enabled: list[PluginRef] = []
    disabled: list[str] = []
    for key in ("enabled", "disabled"):
        items = raw.get(key) or []
        if not isinstance(items, list):
            raise ConfigError(f"{where}.{key}: want a list of {{name, weight}}")
        for i, item in enumerate(items):
            at = f"{where}.{key}[{i}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
                raise ConfigError(f"{at}: want {{name: <plugin>, weight: <int>}}, got {item!r}")
            extra = sorted(set(item) - {"name", "weight"})
            if extra:
                raise ConfigError(f"{at}: unknown field(s) {', '.join(extra)}")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
                raise ConfigError(f"{at}.weight: want a non-negative integer, got {weight!r}")
            if key == "enabled":
                enabled.append(PluginRef(item["name"], weight))
            else:
                disabled.append(item["name"])
    return PluginSet(tuple(enabled), tuple(disabled))


def _merge(default: PluginSet, custom: PluginSet) -> PluginSet:
    """kube-scheduler's ``mergePluginSet``: defaults not disabled (replaced in place by a custom entry of
    the same name), then the other custom entries."""
    custom_by_name = {ref.name: ref for ref in custom.enabled}
    merged = [custom_by_name.pop(ref.name, ref) for ref in default.enabled if not custom.disables(ref.name)]
    merged += [ref for ref in custom.enabled if ref.name in custom_by_name]
    return PluginSet(tuple(merged), custom.disabled)


def _plugins(raw: Any, where: str) -> dict[str, PluginSet]:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object keyed by extension point")
    out: dict[str, PluginSet] = {}
    for point, value in raw.items():
        if point in UNSUPPORTED_POINTS:
            if _plugin_set(value, f"{where}.{point}").enabled:
                raise ConfigError(
                    f"{where}.{point}: an extender cannot run plugins at {point}; "
                    f"supported points: {', '.join(POINTS)}"
                )
            continue
        if point not in POINTS:
            raise ConfigError(f"{where}.{point}: unknown extension point; supported: {', '.join(POINTS)}")
    for point in POINTS:
        custom = _plugin_set(raw.get(point), f"{where}.{point}")
        out[point] = _merge(DEFAULT_PLUGINS.get(point, PluginSet()), custom)
    return out


def parse_profile(doc: Any, source: str = "config") -> Profile:
    """The profile from a decoded KubeSchedulerConfiguration (``None``/``{}``: the default profile)."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: want a KubeSchedulerConfiguration object")
    kind = doc.get("kind", KIND)
    if kind != KIND:
        raise ConfigError(f"{source}: kind {kind!r}: want {KIND}")
    api_version = str(doc.get("apiVersion", f"{API_GROUP}/v1"))
    if api_version.split("/", maxsplit=1)[0] != API_GROUP:
        raise ConfigError(f"{source}: apiVersion {api_version!r}: want {API_GROUP}/v1")
    profiles = doc.get("profiles")
    if profiles is None or profiles == []:
        profiles = [{}]
    if not isinstance(profiles, list) or not all(isinstance(p, Mapping) for p in profiles):
        raise ConfigError(f"{source}: profiles: want a list of objects")
    if len(profiles) > 1:
        raise ConfigError(
            f"{source}: profiles: the extender serves one profile, found {len(profiles)} "
            "(kube-scheduler calls the same extender for every profile)"
        )
    raw = profiles[0]
    where = f"{source}: profiles[0]"
    unknown = sorted(set(raw) - {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"})
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return Profile(
        scheduler_name=str(raw.get("schedulerName") or "default-scheduler"),
        plugins=_plugins(raw.get("plugins"), f"{where}.plugins"),
        plugin_config=plugin_config(raw.get("pluginConfig"), f"{where}.pluginConfig"),
    )


def default_profile() -> Profile:
    return parse_profile(None, "default")


def load_profile(path: str | Path) -> Profile:
    """Read ``--config``: a YAML (or JSON) KubeSchedulerConfiguration."""
    return parse_profile(read_config_file(path), f"--config {path}")
