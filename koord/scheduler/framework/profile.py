"""The extender's profile, read from ``--config`` in the shape of KubeSchedulerConfiguration
(``kubescheduler.config.k8s.io/v1``): ``profiles[0].plugins.<point>.enabled/disabled[{name, weight}]`` and
``profiles[0].pluginConfig[{name, args}]``.

Merging follows kube-scheduler (:func:`koord.runtime.pluginset.merge_plugin_set`, shared with the
descheduler): the default plugins (LoadAwareScheduling at ``multiPoint``, weight 1) minus ``disabled`` (a
name, or ``"*"`` for all defaults), with ``enabled`` entries replacing a default of the same name in place
and the rest appended. Anything malformed is a :class:`ConfigError` that
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
from koord.runtime.pluginset import PluginRef, PluginSet, merge_plugin_set, parse_plugin_set, plugin_config
from koord.scheduler.framework.interface import EXTENSION_POINTS

__all__ = [
    "DEFAULT_PLUGINS",
    "MULTI_POINT",
    "POINTS",
    "PluginRef",
    "PluginSet",
    "Profile",
    "default_profile",
    "load_profile",
    "parse_profile",
]

API_GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
MULTI_POINT = "multiPoint"
POINTS = (MULTI_POINT, *EXTENSION_POINTS)
UNSUPPORTED_POINTS = ("preEnqueue", "queueSort", "postFilter", "permit", "preBind", "bind", "postBind")
"""kube-scheduler's points an extender cannot take part in; enabling a plugin there is an error."""


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


def _plugins(raw: Any, where: str) -> dict[str, PluginSet]:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object keyed by extension point")
    out: dict[str, PluginSet] = {}
    for point, value in raw.items():
        if point in UNSUPPORTED_POINTS:
            if parse_plugin_set(value, f"{where}.{point}", weights=True).enabled:
                raise ConfigError(
                    f"{where}.{point}: an extender cannot run plugins at {point}; "
                    f"supported points: {', '.join(POINTS)}"
                )
            continue
        if point not in POINTS:
            raise ConfigError(f"{where}.{point}: unknown extension point; supported: {', '.join(POINTS)}")
    for point in POINTS:
        custom = parse_plugin_set(raw.get(point), f"{where}.{point}", weights=True)
        out[point] = merge_plugin_set(DEFAULT_PLUGINS.get(point, PluginSet()), custom)
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
