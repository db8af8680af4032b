"""A scheduling profile in the shape of KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``):
``plugins.<point>.enabled/disabled[{name, weight}]`` (``multiPoint`` and each extension point) and
``pluginConfig[{name, args}]``, merged over a front end's default plugins as kube-scheduler merges them
(:func:`koordshared.runtime.pluginset.merge_plugin_set`, shared with the descheduler). Anything malformed is a
:class:`ConfigError` that names the field.

koord-scheduler reads whole configurations (several profiles, kube-scheduler's default plugins) in
:mod:`koord.scheduler.config`. The extender front end serves one profile whose default is
LoadAwareScheduling at ``multiPoint`` and whose points are those an extender can take part in
(:func:`parse_profile`); keys that belong to kube-scheduler itself (``extenders``, ``leaderElection``,
``clientConnection``...) are ignored there, so one file can describe both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koord.scheduler.framework.interface import EXTENSION_POINTS
from koordshared.runtime.configfile import read_config_file
from koordshared.runtime.errors import ConfigError
from koordshared.runtime.pluginset import (
    PluginRef,
    PluginSet,
    merge_plugin_set,
    parse_plugin_set,
    plugin_config,
)

__all__ = [
    "EXTENDER_DEFAULT_PLUGINS",
    "EXTENDER_POINTS",
    "MULTI_POINT",
    "Enabled",
    "PluginRef",
    "PluginSet",
    "Profile",
    "default_profile",
    "load_profile",
    "parse_plugins",
    "parse_profile",
]

API_GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
MULTI_POINT = "multiPoint"
EXTENDER_POINTS = ("preFilter", "filter", "preScore", "score", "reserve")
"""The points an extender can take part in (kube-scheduler runs it between its own Filter and Score)."""


@dataclass(frozen=True, slots=True)
class Enabled:
    """A built plugin as a point runs it, with its Score weight."""

    plugin: Any
    weight: int = 1
    name: str = field(init=False)
    """The plugin's name, read once: the filter loops of a preemption dry run ask it half a million times."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", str(self.plugin.name))


EXTENDER_DEFAULT_PLUGINS: Mapping[str, PluginSet] = {
    MULTI_POINT: PluginSet(enabled=(PluginRef("LoadAwareScheduling", 1),)),
}


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str = "default-scheduler"
    plugins: Mapping[str, PluginSet] = field(default_factory=dict)
    """Extension point (``multiPoint``, ``filter``, ...) -> the merged set."""
    plugin_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Plugin name -> its ``args`` (``apiVersion``/``kind`` removed)."""
    percentage_of_nodes_to_score: int | None = None
    """The profile's own ``percentageOfNodesToScore`` (``None``: the configuration's)."""

    def point(self, name: str) -> PluginSet:
        return self.plugins.get(name, PluginSet())

    def names(self) -> list[str]:
        """Every plugin enabled anywhere, in first-seen order."""
        seen: dict[str, None] = {}
        for point in (MULTI_POINT, *EXTENSION_POINTS):
            for ref in self.point(point).enabled:
                seen.setdefault(ref.name, None)
        return list(seen)


def parse_plugins(
    raw: Any, where: str, *, points: Sequence[str], defaults: Mapping[str, PluginSet], front_end: str
) -> dict[str, PluginSet]:
    """``plugins`` of a profile, each point merged over ``defaults``; a point outside ``points`` is an
    error naming what ``front_end`` supports (an empty set there is accepted)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object keyed by extension point")
    supported = (MULTI_POINT, *points)
    for point, value in raw.items():
        if point in supported:
            continue
        if point in EXTENSION_POINTS:
            if parse_plugin_set(value, f"{where}.{point}", weights=True).enabled:
                raise ConfigError(
                    f"{where}.{point}: {front_end} cannot run plugins at {point}; "
                    f"supported points: {', '.join(supported)}"
                )
            continue
        raise ConfigError(f"{where}.{point}: unknown extension point; supported: {', '.join(supported)}")
    return {
        point: merge_plugin_set(
            defaults.get(point, PluginSet()),
            parse_plugin_set(raw.get(point), f"{where}.{point}", weights=True),
        )
        for point in supported
    }


def parse_profile(doc: Any, source: str = "config") -> Profile:
    """The extender's profile from a decoded KubeSchedulerConfiguration (``None``/``{}``: the default
    profile, LoadAwareScheduling everywhere)."""
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
    plugins = parse_plugins(
        raw.get("plugins"),
        f"{where}.plugins",
        points=EXTENDER_POINTS,
        defaults=EXTENDER_DEFAULT_PLUGINS,
        front_end="an extender",
    )
    return Profile(
        scheduler_name=str(raw.get("schedulerName") or "default-scheduler"),
        plugins=plugins,
        plugin_config=plugin_config(raw.get("pluginConfig"), f"{where}.pluginConfig"),
    )


def default_profile() -> Profile:
    return parse_profile(None, "default")


def load_profile(path: str | Path) -> Profile:
    """Read ``--config``: a YAML (or JSON) KubeSchedulerConfiguration."""
    return parse_profile(read_config_file(path), f"--config {path}")
